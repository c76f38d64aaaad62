package io.trustmsg.client;

/**
 * 403: the token belongs to another producer, or the topic is not in its allow-list. Never retried.
 */
public class ForbiddenException extends TrustmsgException {
  private static final long serialVersionUID = 1L;

  public ForbiddenException(String code, String message) {
    super(403, code, "HTTP 403 (" + code + "): " + message);
  }
}
