package io.trustmsg.kafka;

import io.trustmsg.client.InvalidRequestException;
import io.trustmsg.client.WebhookSigner;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * One record of the Kafka way in (docs/kafka-submit.md): a prepare, commit or rollback, keyed by
 * the message key, its contract headers, the other headers in byte order of their names, and {@code
 * trustmsg-signature: v1,<base64 HMAC-SHA256>} over the lines {@code op}, {@code biz_id}, {@code
 * message_key}, {@code topic}, {@code key}, each other header {@code name=value}, then the value's
 * bytes. A field that would make the lines ambiguous (a line break, an {@code =} in a header name)
 * is refused before signing.
 */
public final class SubmitRecord {
  /** Names in byte order of their UTF-8, as the signature orders them. */
  public static final Comparator<String> BYTE_ORDER =
      (a, b) ->
          Arrays.compareUnsigned(
              a.getBytes(StandardCharsets.UTF_8), b.getBytes(StandardCharsets.UTF_8));

  private final String op;
  private final String bizId;
  private final String messageKey;
  private final String topic;
  private final String key;
  private final TreeMap<String, String> headers;
  private final byte[] value;

  private SubmitRecord(
      String op,
      String bizId,
      String messageKey,
      String topic,
      String key,
      Map<String, String> headers,
      byte[] value) {
    this.op = op;
    this.bizId = Objects.requireNonNull(bizId, "bizId");
    this.messageKey = Objects.requireNonNull(messageKey, "messageKey");
    this.topic = topic == null ? "" : topic;
    this.key = key;
    this.headers = new TreeMap<>(BYTE_ORDER);
    this.headers.putAll(headers);
    this.value = value == null ? new byte[0] : value;
    refuseAmbiguous();
  }

  /**
   * A prepare: {@code headers} are the other headers as they go on the record (user headers, {@code
   * traceparent}, {@code trustmsg-deliver-after-ms}, …).
   */
  public static SubmitRecord prepare(
      String bizId,
      String messageKey,
      String topic,
      String key,
      Map<String, String> headers,
      byte[] value) {
    Objects.requireNonNull(topic, "topic");
    return new SubmitRecord("prepare", bizId, messageKey, topic, key, headers, value);
  }

  public static SubmitRecord commit(String bizId, String messageKey) {
    return new SubmitRecord("commit", bizId, messageKey, "", null, Map.of(), null);
  }

  public static SubmitRecord rollback(String bizId, String messageKey) {
    return new SubmitRecord("rollback", bizId, messageKey, "", null, Map.of(), null);
  }

  /** Any of the three, as the vectors give them. */
  public static SubmitRecord of(
      String op,
      String bizId,
      String messageKey,
      String topic,
      String key,
      Map<String, String> headers,
      byte[] value) {
    if (!(op.equals("prepare") || op.equals("commit") || op.equals("rollback"))) {
      throw InvalidRequestException.refused(
          "invalid_request", "op is prepare, commit or rollback, not " + op);
    }
    return new SubmitRecord(op, bizId, messageKey, topic, key, headers, value);
  }

  private void refuseAmbiguous() {
    check("biz_id", bizId);
    check("message_key", messageKey);
    check("topic", topic);
    if (key != null) {
      check("key", key);
    }
    for (Map.Entry<String, String> h : headers.entrySet()) {
      check("header name " + h.getKey(), h.getKey());
      check("header " + h.getKey(), Objects.requireNonNull(h.getValue(), h.getKey()));
      if (h.getKey().indexOf('=') >= 0) {
        throw InvalidRequestException.refused(
            "invalid_request",
            "header name " + h.getKey() + " holds '=': it would make the signed lines ambiguous");
      }
    }
  }

  private static void check(String what, String v) {
    if (v.indexOf('\n') >= 0 || v.indexOf('\r') >= 0) {
      throw InvalidRequestException.refused(
          "invalid_request",
          what + " holds a line break: it would make the signed lines ambiguous");
    }
  }

  /** The exact bytes the signature covers. */
  public byte[] signingInput() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (String line : new String[] {op, bizId, messageKey, topic, key == null ? "" : key}) {
      out.writeBytes((line + "\n").getBytes(StandardCharsets.UTF_8));
    }
    headers.forEach(
        (n, v) -> out.writeBytes((n + "=" + v + "\n").getBytes(StandardCharsets.UTF_8)));
    out.writeBytes(value);
    return out.toByteArray();
  }

  /** The {@code trustmsg-signature} header's value with {@code secret}. */
  public String signature(WebhookSigner signer) {
    return "v1," + signer.sign(signingInput());
  }

  /** The signed record for {@code submitTopic}. */
  public ProducerRecord<byte[], byte[]> toRecord(String submitTopic, WebhookSigner signer) {
    RecordHeaders h = new RecordHeaders();
    h.add("trustmsg-op", utf8(op));
    h.add("trustmsg-biz-id", utf8(bizId));
    h.add("trustmsg-message-key", utf8(messageKey));
    if (op.equals("prepare")) {
      h.add("trustmsg-topic", utf8(topic));
      if (key != null) {
        h.add("trustmsg-key", utf8(key));
      }
    }
    headers.forEach((n, v) -> h.add(n, utf8(v)));
    h.add("trustmsg-signature", utf8(signature(signer)));
    return new ProducerRecord<>(submitTopic, null, utf8(messageKey), value.clone(), h);
  }

  public String op() {
    return op;
  }

  public String messageKey() {
    return messageKey;
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
