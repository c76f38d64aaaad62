package io.trustmsg.spring;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.trustmsg.client.Message;
import java.util.Objects;
import org.springframework.transaction.IllegalTransactionStateException;

/**
 * Publishes objects from inside a {@code @Transactional} method: each one is serialized to JSON by
 * the application's {@link ObjectMapper} bean (the one Spring MVC uses, with its modules and
 * naming) and written as a row of the local message table on the transaction's own connection, so
 * the message commits or rolls back with the method, and trustmsg's relay ({@code --outbox-source})
 * delivers it once it committed.
 *
 * <pre>{@code
 * @Transactional
 * public Order place(NewOrder o) {
 *   jdbc.update("INSERT INTO orders (id, cents) VALUES (?, ?)", o.id(), o.cents());
 *   publisher.publish("order-" + o.id(), "orders.placed", o.id(), new OrderPlaced(o.id(), o.cents()));
 *   return new Order(o.id());
 * }
 * }</pre>
 *
 * <p>The record's value is the JSON, with the header {@code content-type: application/json}. A
 * {@code byte[]} payload is sent as it is, a {@code String} as its UTF-8 text (neither is
 * re-serialized). Spring Kafka's {@code KafkaTemplate.send(topic, key, value)} takes the same
 * arguments; the message key (trustmsg's idempotency key, unique per producer) comes first.
 */
public class TrustmsgPublisher {
  /** The header the JSON payloads carry. */
  public static final String CONTENT_TYPE_HEADER = "content-type";

  private final TrustmsgOutbox outbox;
  private final ObjectMapper mapper;

  /** Publishes through {@code outbox}, serializing with {@code mapper}. */
  public TrustmsgPublisher(TrustmsgOutbox outbox, ObjectMapper mapper) {
    this.outbox = Objects.requireNonNull(outbox, "outbox");
    this.mapper = Objects.requireNonNull(mapper, "mapper");
  }

  /**
   * Writes {@code payload} as a message without a record key, in the current transaction.
   *
   * @return the outbox row's id
   * @throws IllegalTransactionStateException no transaction is active
   * @throws IllegalArgumentException the payload cannot be serialized
   */
  public long publish(String messageKey, String topic, Object payload) {
    return publish(messageKey, topic, null, payload);
  }

  /**
   * Writes {@code payload} as a message with the record key {@code recordKey} (the Kafka record's
   * key: its partition), in the current transaction.
   *
   * @param messageKey trustmsg's idempotency key, unique per producer
   * @param topic the Kafka topic
   * @param recordKey the record's key, or null for none
   * @param payload the value: an object for the {@link ObjectMapper}, or a {@code byte[]} or {@code
   *     String} sent as it is
   * @return the outbox row's id
   * @throws IllegalTransactionStateException no transaction is active
   * @throws IllegalArgumentException the payload cannot be serialized
   * @throws io.trustmsg.client.InvalidRequestException trustmsg would refuse the message
   */
  public long publish(String messageKey, String topic, String recordKey, Object payload) {
    Message.Builder b = Message.builder(messageKey, topic);
    if (recordKey != null) {
      b.key(recordKey);
    }
    return outbox.enqueue(withPayload(b, payload).build());
  }

  /**
   * Writes {@code message} as it is (for headers, a delay or a trace context), in the current
   * transaction; {@link #json} builds its payload.
   */
  public long publish(Message message) {
    return outbox.enqueue(message);
  }

  /**
   * {@code builder} with {@code payload} serialized as {@link #publish(String, String, String,
   * Object)} does, for a message you complete yourself.
   */
  public Message.Builder json(Message.Builder builder, Object payload) {
    return withPayload(Objects.requireNonNull(builder, "builder"), payload);
  }

  private Message.Builder withPayload(Message.Builder b, Object payload) {
    Objects.requireNonNull(payload, "payload");
    if (payload instanceof byte[] bytes) {
      return b.payload(bytes);
    }
    if (payload instanceof String text) {
      return b.payload(text);
    }
    try {
      return b.payload(mapper.writeValueAsString(payload))
          .header(CONTENT_TYPE_HEADER, "application/json");
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "the payload " + payload.getClass().getName() + " cannot be serialized to JSON", e);
    }
  }

  /** The outbox it writes to. */
  public TrustmsgOutbox outbox() {
    return outbox;
  }
}
