package io.trustmsg.client;

/**
 * A check-back call whose signature does not verify: forged, tampered, stale, or missing its
 * headers. Answer 401 and do nothing else.
 */
public class InvalidSignatureException extends Exception {
  private static final long serialVersionUID = 1L;

  private final String code;

  public InvalidSignatureException(String code, String message) {
    super(message);
    this.code = code;
  }

  /**
   * {@code missing_signature}, {@code bad_timestamp}, {@code signature_expired} or {@code
   * bad_signature}.
   */
  public String code() {
    return code;
  }
}
