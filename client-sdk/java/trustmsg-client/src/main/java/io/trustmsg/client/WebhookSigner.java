package io.trustmsg.client;

import java.nio.charset.StandardCharsets;
import java.security.InvalidKeyException;
import java.security.NoSuchAlgorithmException;
import java.util.Base64;
import java.util.Objects;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * HMAC-SHA256 with a Standard Webhooks secret ({@code whsec_<base64>}): the check-back's signature
 * and the Kafka way in's.
 */
public final class WebhookSigner {
  private static final String PREFIX = "whsec_";
  private final byte[] key;

  /**
   * @param secret the producer's signing secret, {@code whsec_<base64>} (the registration's {@code
   *     signing_secret})
   * @throws IllegalArgumentException not a {@code whsec_} secret
   */
  public WebhookSigner(String secret) {
    Objects.requireNonNull(secret, "secret");
    if (!secret.startsWith(PREFIX)) {
      throw new IllegalArgumentException(
          "a signing secret is whsec_<base64> (the registration's signing_secret); this one does not start with whsec_");
    }
    try {
      this.key = Base64.getDecoder().decode(secret.substring(PREFIX.length()));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "a signing secret is whsec_<base64>; the part after whsec_ is not base64", e);
    }
    if (key.length == 0) {
      throw new IllegalArgumentException("the signing secret's key is empty");
    }
  }

  /** {@code base64(HMAC-SHA256(key, input))}. */
  public String sign(byte[] input) {
    return Base64.getEncoder().encodeToString(mac(input));
  }

  byte[] mac(byte[] input) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(key, "HmacSHA256"));
      return mac.doFinal(input);
    } catch (NoSuchAlgorithmException | InvalidKeyException e) {
      throw new IllegalStateException("HmacSHA256 is part of every Java runtime", e);
    }
  }

  /** The check-back signature of a body: {@code v1,} and the HMAC of {@code id.timestamp.body}. */
  public String signWebhook(String webhookId, long timestamp, byte[] body) {
    return signWebhook(webhookId, Long.toString(timestamp), body);
  }

  /** As {@link #signWebhook(String, long, byte[])} with the timestamp as its header reads. */
  public String signWebhook(String webhookId, String timestamp, byte[] body) {
    byte[] prefix = (webhookId + "." + timestamp + ".").getBytes(StandardCharsets.UTF_8);
    byte[] input = new byte[prefix.length + body.length];
    System.arraycopy(prefix, 0, input, 0, prefix.length);
    System.arraycopy(body, 0, input, prefix.length, body.length);
    return "v1," + sign(input);
  }
}
