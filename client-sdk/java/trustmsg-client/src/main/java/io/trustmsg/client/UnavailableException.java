package io.trustmsg.client;

/**
 * Network errors or 5xx answers on every attempt. The request may or may not have reached trustmsg;
 * every producer call is idempotent, so repeating it later is safe.
 */
public class UnavailableException extends TrustmsgException {
  private static final long serialVersionUID = 1L;

  private final int attempts;

  public UnavailableException(
      int attempts, int status, String code, String message, Throwable cause) {
    super(
        status, code, "trustmsg unavailable after " + attempts + " attempt(s): " + message, cause);
    this.attempts = attempts;
  }

  /** How many requests were made. */
  public int attempts() {
    return attempts;
  }

  @Override
  public boolean isUnavailable() {
    return true;
  }
}
