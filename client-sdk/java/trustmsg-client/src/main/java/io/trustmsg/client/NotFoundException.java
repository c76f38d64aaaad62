package io.trustmsg.client;

/** 404: e.g. {@code message_not_found} on commit or get of an unknown message. Never retried. */
public class NotFoundException extends TrustmsgException {
  private static final long serialVersionUID = 1L;

  public NotFoundException(String code, String message) {
    super(404, code, "HTTP 404 (" + code + "): " + message);
  }
}
