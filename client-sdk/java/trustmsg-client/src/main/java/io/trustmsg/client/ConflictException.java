package io.trustmsg.client;

/**
 * 409: e.g. {@code prepare_conflict} (same key, different content), {@code rolled_back} (a prepare
 * after a rollback), {@code already_committed}, {@code already_rolled_back}. Never retried.
 */
public class ConflictException extends TrustmsgException {
  private static final long serialVersionUID = 1L;

  public ConflictException(String code, String message) {
    super(409, code, "HTTP 409 (" + code + "): " + message);
  }

  /** For the helpers' own refusals ({@link NotPreparedException}): {@code message} as it is. */
  protected ConflictException(String code, String message, Throwable cause) {
    super(409, code, message, cause);
  }
}
