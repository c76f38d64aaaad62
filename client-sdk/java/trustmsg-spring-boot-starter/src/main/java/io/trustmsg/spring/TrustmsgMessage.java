package io.trustmsg.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks an application event type as a trustmsg message, the way Spring Modulith's
 * {@code @Externalized} marks events for its event publication registry: an event of this type
 * published with {@code ApplicationEventPublisher.publishEvent(event)} inside a transaction is
 * written, in that same transaction, as a row of the local message table (the event serialized by
 * the application's {@code ObjectMapper}), so it is delivered if and only if the transaction
 * commits. {@link TrustmsgEventExternalizer} does it; published outside a transaction, {@code
 * publishEvent} throws {@code IllegalTransactionStateException}.
 *
 * <pre>{@code
 * @TrustmsgMessage(topic = "orders.placed", messageKey = "'order-placed-' + id()", key = "id()")
 * public record OrderPlaced(String id, long cents) {}
 *
 * @Transactional
 * public void place(String id, long cents) {
 *   jdbc.update("INSERT INTO orders (id, cents) VALUES (?, ?)", id, cents);
 *   events.publishEvent(new OrderPlaced(id, cents));   // the outbox row, in this transaction
 * }
 * }</pre>
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
public @interface TrustmsgMessage {
  /** The Kafka topic; {@code ${…}} placeholders are resolved from the application's properties. */
  String topic();

  /**
   * A SpEL expression on the event giving trustmsg's message key (its idempotency key, unique per
   * producer), e.g. {@code "'order-placed-' + id()"}.
   */
  String messageKey();

  /**
   * A SpEL expression on the event giving the record's key (its partition), e.g. {@code "id()"};
   * empty for no key.
   */
  String key() default "";
}
