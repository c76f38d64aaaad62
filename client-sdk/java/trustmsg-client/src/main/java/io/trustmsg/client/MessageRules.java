package io.trustmsg.client;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * trustmsg's own rules for a message, checked where nothing would otherwise check them before they
 * matter (the local message table's row, a Kafka way in record): what trustmsg would refuse is
 * refused here, with the HTTP API's code, as an {@link InvalidRequestException}.
 */
public final class MessageRules {
  public static final int MAX_MESSAGE_KEY_BYTES = 128;
  public static final int MAX_TOPIC = 249;
  public static final int MAX_RECORD_KEY_BYTES = 1024;
  public static final int MAX_HEADERS = 64;
  public static final int MAX_HEADER_NAME_BYTES = 256;
  public static final int MAX_HEADER_BYTES = 16 * 1024;
  public static final long MAX_DELIVERY_DELAY_MS = 7L * 24 * 60 * 60 * 1000;
  private static final Pattern TOPIC = Pattern.compile("[A-Za-z0-9._-]+");
  private static final Pattern TRACEPARENT =
      Pattern.compile("00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}");

  private MessageRules() {}

  /** Checks everything but the delivery time. */
  public static void check(Message m) {
    checkMessageKey(m.messageKey());
    checkTopic(m.topic());
    m.key()
        .ifPresent(
            k -> {
              int n = utf8(k);
              if (n > MAX_RECORD_KEY_BYTES) {
                throw refused(
                    "invalid_key",
                    "key must be at most " + MAX_RECORD_KEY_BYTES + " bytes (got " + n + ")");
              }
            });
    checkHeaders(m.headers());
  }

  public static void checkMessageKey(String v) {
    int n = utf8(v);
    if (n < 1 || n > MAX_MESSAGE_KEY_BYTES) {
      throw refused(
          "invalid_message_key",
          "message_key must be 1 to " + MAX_MESSAGE_KEY_BYTES + " bytes of UTF-8 (got " + n + ")");
    }
    if (hasControl(v)) {
      throw refused("invalid_message_key", "message_key must not contain control characters");
    }
  }

  public static void checkTopic(String v) {
    if (v.isEmpty() || v.length() > MAX_TOPIC) {
      throw refused(
          "invalid_topic",
          "topic must be 1 to " + MAX_TOPIC + " characters (got " + v.length() + ")");
    }
    if (v.equals(".") || v.equals("..")) {
      throw refused("invalid_topic", "topic cannot be " + v);
    }
    if (!TOPIC.matcher(v).matches()) {
      throw refused(
          "invalid_topic", "topic may contain only ASCII letters, digits, '.', '_' and '-': " + v);
    }
  }

  public static void checkHeaders(Map<String, String> headers) {
    if (headers.size() > MAX_HEADERS) {
      throw refused(
          "invalid_headers",
          "at most " + MAX_HEADERS + " headers are allowed (got " + headers.size() + ")");
    }
    int total = 0;
    for (Map.Entry<String, String> h : headers.entrySet()) {
      String name = h.getKey();
      String value = h.getValue();
      int n = utf8(name);
      if (n < 1 || n > MAX_HEADER_NAME_BYTES) {
        throw refused(
            "invalid_headers", "header names must be 1 to " + MAX_HEADER_NAME_BYTES + " bytes");
      }
      if (hasControl(name)) {
        throw refused("invalid_headers", "header name " + name + " contains a control character");
      }
      if (hasControl(value)) {
        throw refused(
            "invalid_headers", "the value of header " + name + " contains a control character");
      }
      if (name.toLowerCase(Locale.ROOT).startsWith("trustmsg-")) {
        throw refused(
            "invalid_headers",
            "header " + name + " uses the reserved prefix trustmsg-; trustmsg sets those itself");
      }
      total += n + utf8(value);
    }
    if (total > MAX_HEADER_BYTES) {
      throw refused(
          "invalid_headers",
          "headers total " + total + " bytes; at most " + MAX_HEADER_BYTES + " are allowed");
    }
  }

  /** The delay in milliseconds, checked (0 to 7 days). */
  public static long checkDelay(Duration delay) {
    long ms;
    try {
      ms = delay.toMillis();
    } catch (ArithmeticException e) {
      ms = Long.MAX_VALUE;
    }
    if (ms < 0 || ms > MAX_DELIVERY_DELAY_MS) {
      throw refused(
          "invalid_deliver_after_ms",
          "deliver_after_ms is "
              + ms
              + "; a delay is 0 to "
              + MAX_DELIVERY_DELAY_MS
              + " ms (7 days)");
    }
    return ms;
  }

  /** The delivery time, checked (from 1970 to 7 days from {@code now}; millisecond precision). */
  public static Instant checkDeliverAt(Instant at, Instant now) {
    Instant t = Instant.ofEpochMilli(at.toEpochMilli());
    if (t.toEpochMilli() < 0) {
      throw refused("invalid_deliver_at", "deliver_at " + t + " is before 1970");
    }
    Instant latest = now.plusMillis(MAX_DELIVERY_DELAY_MS);
    if (t.isAfter(latest)) {
      throw refused(
          "invalid_deliver_at",
          "deliver_at " + t + " is more than 7 days ahead (the latest now is " + latest + ")");
    }
    return t;
  }

  /** The traceparent if it is a valid W3C version-00 one, else null (left out, not refused). */
  public static String validTraceparent(String tp) {
    return tp != null && TRACEPARENT.matcher(tp).matches() ? tp : null;
  }

  static boolean hasControl(String s) {
    return s.codePoints().anyMatch(Character::isISOControl);
  }

  static int utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8).length;
  }

  static InvalidRequestException refused(String code, String message) {
    return InvalidRequestException.refused(code, message);
  }
}
