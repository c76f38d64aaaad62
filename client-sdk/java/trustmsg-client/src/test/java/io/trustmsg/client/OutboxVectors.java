package io.trustmsg.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.Base64;

/** A message of vectors/outbox-rows.json. */
public final class OutboxVectors {
  private OutboxVectors() {}

  public static Message message(JsonNode m) {
    var b =
        Message.builder(m.get("message_key").asText(), m.get("topic").asText())
            .payload(Base64.getDecoder().decode(m.get("payload_base64").asText()));
    if (m.hasNonNull("key")) {
      b.key(m.get("key").asText());
    }
    if (m.hasNonNull("headers")) {
      m.get("headers").properties().forEach(e -> b.header(e.getKey(), e.getValue().asText()));
    }
    if (m.hasNonNull("traceparent")) {
      b.traceContext(m.get("traceparent").asText(), null);
    }
    if (m.hasNonNull("deliver_after_ms")) {
      b.deliverAfter(Duration.ofMillis(m.get("deliver_after_ms").asLong()));
    }
    return b.build();
  }
}
