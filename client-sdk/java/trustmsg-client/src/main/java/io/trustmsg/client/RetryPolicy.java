package io.trustmsg.client;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How calls are repeated after a network error or a 5xx answer: up to {@code maxRetries} more
 * attempts, waiting {@code minDelay}, then twice as long each time up to {@code maxDelay} (each
 * wait between 3/4 and all of that, so that many clients do not retry in step). A {@code
 * Retry-After} the service sends is honoured up to a minute. 4xx answers (a 409 conflict, a 400)
 * are final and never repeated.
 */
public record RetryPolicy(int maxRetries, Duration minDelay, Duration maxDelay) {
  private static final Duration MAX_RETRY_AFTER = Duration.ofMinutes(1);

  public RetryPolicy {
    if (maxRetries < 0) {
      throw new IllegalArgumentException("maxRetries must be 0 or more, got " + maxRetries);
    }
    Objects.requireNonNull(minDelay, "minDelay");
    Objects.requireNonNull(maxDelay, "maxDelay");
    if (minDelay.isNegative() || maxDelay.compareTo(minDelay) < 0) {
      throw new IllegalArgumentException(
          "delays must satisfy 0 <= minDelay <= maxDelay, got " + minDelay + " and " + maxDelay);
    }
  }

  /** 5 retries from 100 ms, doubling up to 5 s. */
  public static RetryPolicy defaults() {
    return new RetryPolicy(5, Duration.ofMillis(100), Duration.ofSeconds(5));
  }

  /** One attempt, no retry. */
  public static RetryPolicy none() {
    return new RetryPolicy(0, Duration.ofMillis(100), Duration.ofSeconds(5));
  }

  /** The wait before retry number {@code retry} (1 for the first retry). */
  Duration delay(int retry, Duration retryAfter) {
    long base = minDelay.toMillis();
    for (int i = 1; i < retry && base < maxDelay.toMillis(); i++) {
      base *= 2;
    }
    base = Math.min(base, maxDelay.toMillis());
    long jittered = base - ThreadLocalRandom.current().nextLong(base / 4 + 1);
    Duration d = Duration.ofMillis(jittered);
    if (retryAfter != null) {
      Duration asked = retryAfter.compareTo(MAX_RETRY_AFTER) > 0 ? MAX_RETRY_AFTER : retryAfter;
      if (asked.compareTo(d) > 0) {
        d = asked;
      }
    }
    return d;
  }
}
