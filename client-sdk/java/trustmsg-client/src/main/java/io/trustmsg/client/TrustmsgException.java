package io.trustmsg.client;

import java.util.Optional;
import java.util.OptionalInt;

/**
 * Why a call to trustmsg failed: the service's error code and the HTTP status of its answer.
 *
 * <p>4xx answers are final and map to their own subclasses, never retried: {@link
 * ConflictException} (409), {@link NotFoundException} (404), {@link InvalidRequestException} (400,
 * 413, 415), {@link UnauthorizedException} (401), {@link ForbiddenException} (403). Network errors
 * and 5xx answers are retried with backoff and, once the retries are used up, become {@link
 * UnavailableException}; every producer call is idempotent, so repeating it later is safe.
 */
public class TrustmsgException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String code;
  private final int status;

  /**
   * @param status the HTTP status of the (last) answer, 0 when there was none
   * @param code trustmsg's error code, or null when the answer had none
   */
  public TrustmsgException(int status, String code, String message, Throwable cause) {
    super(message, cause);
    this.status = status;
    this.code = code;
  }

  public TrustmsgException(int status, String code, String message) {
    this(status, code, message, null);
  }

  /**
   * trustmsg's error code ({@code prepare_conflict}, {@code invalid_topic}, …), when it sent one.
   */
  public Optional<String> code() {
    return Optional.ofNullable(code);
  }

  /** The HTTP status of the (last) answer, when there was one. */
  public OptionalInt status() {
    return status == 0 ? OptionalInt.empty() : OptionalInt.of(status);
  }

  /**
   * True when the call may or may not have reached trustmsg and repeating it later is safe (the
   * retries were used up on network errors or 5xx, or Kafka did not acknowledge a record).
   */
  public boolean isUnavailable() {
    return false;
  }

  /** The exception for a final (non-retryable) error answer. */
  static TrustmsgException fromStatus(int status, String code, String message) {
    return switch (status) {
      case 400, 413, 415 ->
          new InvalidRequestException(status, code == null ? "invalid" : code, message);
      case 401 -> new UnauthorizedException(code == null ? "unauthorized" : code, message);
      case 403 -> new ForbiddenException(code == null ? "forbidden" : code, message);
      case 404 -> new NotFoundException(code == null ? "not_found" : code, message);
      case 409 -> new ConflictException(code == null ? "conflict" : code, message);
      default -> new UnexpectedResponseException(status, code, message);
    };
  }
}
