package io.trustmsg.client;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.Collections;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * A message to publish: its key (the producer's idempotency key, e.g. an order id), the Kafka
 * topic, the record's value and, optionally, its record key, headers, delivery time and trace
 * context. Immutable; build one with {@link #builder(String, String)}.
 *
 * <pre>{@code
 * Message m = Message.builder("order-42", "orders")
 *     .payload("{\"order\":42}")
 *     .key("customer-7")
 *     .header("content-type", "application/json")
 *     .build();
 * }</pre>
 */
public final class Message {
  private final String messageKey;
  private final String topic;
  private final String key;
  private final byte[] payload;
  private final boolean binary;
  private final Map<String, String> headers;
  private final Duration deliverAfter;
  private final Instant deliverAt;
  private final String traceparent;
  private final String tracestate;

  private Message(Builder b) {
    this.messageKey = b.messageKey;
    this.topic = b.topic;
    this.key = b.key;
    this.payload = b.payload;
    this.binary = b.binary;
    this.headers = Collections.unmodifiableMap(new TreeMap<>(b.headers));
    this.deliverAfter = b.deliverAfter;
    this.deliverAt = b.deliverAt;
    this.traceparent = b.traceparent;
    this.tracestate = b.tracestate;
  }

  /**
   * Starts a message.
   *
   * @param messageKey the producer's unique key for this message: 1 to 128 bytes of UTF-8, no
   *     control characters; keys compare byte for byte ({@code "A"}, {@code "A "} and {@code "a"}
   *     are three messages)
   * @param topic the Kafka topic (1 to 249 of {@code A-Z a-z 0-9 . _ -})
   */
  public static Builder builder(String messageKey, String topic) {
    return new Builder(messageKey, topic);
  }

  public String messageKey() {
    return messageKey;
  }

  public String topic() {
    return topic;
  }

  /** The Kafka record key; empty lets Kafka's partitioner choose. */
  public Optional<String> key() {
    return Optional.ofNullable(key);
  }

  /** The record value's bytes (a copy). */
  public byte[] payload() {
    return payload.clone();
  }

  /** True when the payload was given as bytes (sent base64-encoded), false when as text. */
  public boolean isBinary() {
    return binary;
  }

  /** The user's record headers, sorted by name. */
  public Map<String, String> headers() {
    return headers;
  }

  public Optional<Duration> deliverAfter() {
    return Optional.ofNullable(deliverAfter);
  }

  public Optional<Instant> deliverAt() {
    return Optional.ofNullable(deliverAt);
  }

  /** The W3C traceparent given with {@link Builder#traceContext}; else none. */
  public Optional<String> traceparent() {
    return Optional.ofNullable(traceparent);
  }

  public Optional<String> tracestate() {
    return Optional.ofNullable(tracestate);
  }

  /**
   * The trace headers to send: the explicit trace context if one was given, else the current
   * OpenTelemetry context when opentelemetry-api is on the classpath and a span is current.
   */
  public Map<String, String> traceHeaders() {
    if (traceparent != null) {
      Map<String, String> h = new TreeMap<>();
      h.put("traceparent", traceparent);
      if (tracestate != null) {
        h.put("tracestate", tracestate);
      }
      return h;
    }
    return Tracing.currentTraceHeaders();
  }

  byte[] payloadRef() {
    return payload;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Message m
        && messageKey.equals(m.messageKey)
        && topic.equals(m.topic)
        && Objects.equals(key, m.key)
        && Arrays.equals(payload, m.payload)
        && binary == m.binary
        && headers.equals(m.headers)
        && Objects.equals(deliverAfter, m.deliverAfter)
        && Objects.equals(deliverAt, m.deliverAt)
        && Objects.equals(traceparent, m.traceparent)
        && Objects.equals(tracestate, m.tracestate);
  }

  @Override
  public int hashCode() {
    return Objects.hash(messageKey, topic, key, Arrays.hashCode(payload), headers);
  }

  @Override
  public String toString() {
    return "Message[messageKey="
        + messageKey
        + ", topic="
        + topic
        + ", payload="
        + payload.length
        + " bytes]";
  }

  /** Builds a {@link Message}. */
  public static final class Builder {
    private final String messageKey;
    private final String topic;
    private String key;
    private byte[] payload = new byte[0];
    private boolean binary;
    private final Map<String, String> headers = new TreeMap<>();
    private Duration deliverAfter;
    private Instant deliverAt;
    private String traceparent;
    private String tracestate;

    private Builder(String messageKey, String topic) {
      this.messageKey = Objects.requireNonNull(messageKey, "messageKey");
      this.topic = Objects.requireNonNull(topic, "topic");
    }

    /** The record value as text (sent as UTF-8). */
    public Builder payload(String text) {
      this.payload = Objects.requireNonNull(text, "payload").getBytes(StandardCharsets.UTF_8);
      this.binary = false;
      return this;
    }

    /** The record value as bytes, kept byte for byte. */
    public Builder payload(byte[] bytes) {
      this.payload = Objects.requireNonNull(bytes, "payload").clone();
      this.binary = true;
      return this;
    }

    /** The Kafka record key (at most 1024 bytes of UTF-8). */
    public Builder key(String key) {
      this.key = Objects.requireNonNull(key, "key");
      return this;
    }

    /**
     * A record header (at most 64; names not starting with {@code trustmsg-}, no control
     * characters). A name given twice keeps the last value.
     */
    public Builder header(String name, String value) {
      headers.put(Objects.requireNonNull(name, "header name"), Objects.requireNonNull(value, name));
      return this;
    }

    public Builder headers(Map<String, String> all) {
      all.forEach(this::header);
      return this;
    }

    /** Deliver no earlier than this long after the prepare (at most 7 days). */
    public Builder deliverAfter(Duration delay) {
      this.deliverAfter = Objects.requireNonNull(delay, "delay");
      this.deliverAt = null;
      return this;
    }

    /** Deliver no earlier than this time (at most 7 days ahead; millisecond precision). */
    public Builder deliverAt(Instant at) {
      this.deliverAt = Objects.requireNonNull(at, "at");
      this.deliverAfter = null;
      return this;
    }

    /**
     * The W3C trace context to carry, instead of the current OpenTelemetry context.
     *
     * @param tracestate may be null
     */
    public Builder traceContext(String traceparent, String tracestate) {
      this.traceparent = Objects.requireNonNull(traceparent, "traceparent");
      this.tracestate = tracestate;
      return this;
    }

    public Message build() {
      return new Message(this);
    }
  }
}
