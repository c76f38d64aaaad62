package io.trustmsg.client;

/**
 * The inbox's database failed (nothing was committed); its {@link java.sql.SQLException} is the
 * cause.
 */
public class InboxException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public InboxException(String message, Throwable cause) {
    super(message, cause);
  }
}
