package io.trustmsg.client;

/** Any other answer: an unexpected status, or a 2xx whose body is not what the API documents. */
public class UnexpectedResponseException extends TrustmsgException {
  private static final long serialVersionUID = 1L;

  public UnexpectedResponseException(int status, String code, String message) {
    super(status, code, "unexpected answer, HTTP " + status + ": " + message);
  }
}
