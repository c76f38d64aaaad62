package io.trustmsg.client;

/** 401: the token is missing or wrong. Never retried. */
public class UnauthorizedException extends TrustmsgException {
  private static final long serialVersionUID = 1L;

  public UnauthorizedException(String code, String message) {
    super(401, code, "HTTP 401 (" + code + "): " + message);
  }
}
