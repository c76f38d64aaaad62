package io.trustmsg.client;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Clock;
import java.time.Duration;
import java.util.Base64;
import java.util.Objects;
import java.util.function.Function;

/**
 * Verifies a check-back call the Standard Webhooks way (docs/check-back.md): the {@code
 * webhook-id}, {@code webhook-timestamp} and {@code webhook-signature} headers, the timestamp
 * within the tolerance (5 minutes either way), and one {@code v1,} signature equal to the HMAC of
 * {@code id.timestamp.body} over the raw body bytes, compared in constant time.
 */
public final class CheckBackVerifier {
  /** Standard Webhooks' tolerance: 5 minutes either way. */
  public static final Duration DEFAULT_TOLERANCE = Duration.ofMinutes(5);

  private final WebhookSigner signer;
  private final Duration tolerance;
  private final Clock clock;

  public CheckBackVerifier(String secret) {
    this(secret, DEFAULT_TOLERANCE, Clock.systemUTC());
  }

  public CheckBackVerifier(String secret, Duration tolerance, Clock clock) {
    this.signer = new WebhookSigner(secret);
    this.tolerance = Objects.requireNonNull(tolerance, "tolerance");
    this.clock = Objects.requireNonNull(clock, "clock");
  }

  /**
   * Verifies a call as received.
   *
   * @param header the request's header of a (lower-case) name, or null when absent
   * @param body the raw body bytes, as received
   * @throws InvalidSignatureException answer 401
   */
  public void verify(Function<String, String> header, byte[] body)
      throws InvalidSignatureException {
    verify(header, body, clock.instant().getEpochSecond());
  }

  /** As {@link #verify(Function, byte[])} with the clock at {@code nowSeconds} (unix). */
  public void verify(Function<String, String> header, byte[] body, long nowSeconds)
      throws InvalidSignatureException {
    String id = nonEmpty(header.apply("webhook-id"));
    String timestamp = nonEmpty(header.apply("webhook-timestamp"));
    String signatures = nonEmpty(header.apply("webhook-signature"));
    if (id == null || timestamp == null || signatures == null) {
      throw new InvalidSignatureException(
          "missing_signature", "webhook-id, webhook-timestamp and webhook-signature are required");
    }
    long ts;
    try {
      ts = Long.parseLong(timestamp.trim());
    } catch (NumberFormatException e) {
      throw new InvalidSignatureException(
          "bad_timestamp", "webhook-timestamp is not an integer number of seconds");
    }
    if (Math.abs(nowSeconds - ts) > tolerance.getSeconds()) {
      throw new InvalidSignatureException(
          "signature_expired",
          "webhook-timestamp is more than "
              + tolerance.getSeconds()
              + " s away from this clock (a stale or replayed call, or a clock out of sync)");
    }
    byte[] expected =
        Base64.getDecoder()
            .decode(
                signer
                    .signWebhook(id, timestamp, body)
                    .substring(3)
                    .getBytes(StandardCharsets.US_ASCII));
    for (String entry : signatures.split(" ")) {
      if (!entry.startsWith("v1,")) {
        continue;
      }
      byte[] given;
      try {
        given = Base64.getDecoder().decode(entry.substring(3));
      } catch (IllegalArgumentException e) {
        continue;
      }
      if (MessageDigest.isEqual(expected, given)) {
        return;
      }
    }
    throw new InvalidSignatureException(
        "bad_signature", "no v1 signature matches the body signed with this producer's secret");
  }

  private static String nonEmpty(String v) {
    return v == null || v.isEmpty() ? null : v;
  }
}
