package io.trustmsg.client;

/**
 * 400, 413 or 415: the request is invalid and will stay invalid (e.g. {@code invalid_topic}, {@code
 * payload_too_large}). The SDK throws it too, with status 400 and the HTTP API's code, for what it
 * refuses before sending anything. Never retried.
 */
public class InvalidRequestException extends TrustmsgException {
  private static final long serialVersionUID = 1L;

  public InvalidRequestException(int status, String code, String message) {
    super(status, code, "HTTP " + status + " (" + code + "): " + message);
  }

  /** A request the SDK refused before sending it, with the code trustmsg would have answered. */
  public static InvalidRequestException refused(String code, String message) {
    return new InvalidRequestException(400, code, message);
  }
}
