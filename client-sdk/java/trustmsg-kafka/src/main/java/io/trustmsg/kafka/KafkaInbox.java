package io.trustmsg.kafka;

import io.trustmsg.client.Inbox;
import io.trustmsg.client.JdbcWork;
import io.trustmsg.client.Processed;
import java.util.Objects;
import java.util.OptionalLong;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;

/** The {@link Inbox} for kafka-clients' records: keyed on their {@code trustmsg-message-id}. */
public final class KafkaInbox {
  private final Inbox inbox;

  public KafkaInbox(Inbox inbox) {
    this.inbox = Objects.requireNonNull(inbox, "inbox");
  }

  /** The record's trustmsg message id; empty when it has no usable {@code trustmsg-message-id}. */
  public static OptionalLong messageId(ConsumerRecord<?, ?> record) {
    Header h = record.headers().lastHeader(Inbox.MESSAGE_ID_HEADER);
    return h == null ? OptionalLong.empty() : Inbox.parseMessageId(h.value());
  }

  /**
   * Runs {@code work} once for the record's message ({@link Inbox#process}).
   *
   * @throws IllegalArgumentException the record has no usable {@code trustmsg-message-id}: it was
   *     not delivered by trustmsg, and processing it unkeyed would lose the once-only guarantee
   */
  public <T, X extends Exception> Processed<T> process(
      ConsumerRecord<?, ?> record, JdbcWork<T, X> work) throws X {
    long id =
        messageId(record)
            .orElseThrow(
                () ->
                    new IllegalArgumentException(
                        "record "
                            + record.topic()
                            + "/"
                            + record.partition()
                            + "@"
                            + record.offset()
                            + " has no valid trustmsg-message-id header; it was not delivered by trustmsg"));
    return inbox.process(id, work);
  }
}
