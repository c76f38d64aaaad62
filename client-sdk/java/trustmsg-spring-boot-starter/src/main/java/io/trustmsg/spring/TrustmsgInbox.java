package io.trustmsg.spring;

import io.trustmsg.client.Inbox;
import io.trustmsg.client.InboxException;
import io.trustmsg.client.Processed;
import java.sql.SQLException;
import java.util.Objects;
import java.util.OptionalLong;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionCallback;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The consumer's inbox for {@code @KafkaListener} methods: the inbox row and the work in one
 * Spring-managed transaction, so a redelivered record is skipped and a failed work leaves nothing
 * (the record is processed again).
 *
 * <pre>{@code
 * @KafkaListener(topics = "orders")
 * void on(ConsumerRecord<String, byte[]> record) {
 *   inbox.process(record, status -> jdbc.update("INSERT INTO invoices …"));
 * }
 * }</pre>
 */
public class TrustmsgInbox {
  private final TransactionTemplate transactions;
  private final DataSource dataSource;
  private final String group;

  public TrustmsgInbox(
      PlatformTransactionManager transactionManager, DataSource dataSource, String consumerGroup) {
    this.transactions =
        new TransactionTemplate(Objects.requireNonNull(transactionManager, "transactionManager"));
    this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
    if (consumerGroup == null || consumerGroup.isEmpty()) {
      throw new IllegalArgumentException(
          "the inbox needs a consumer group: set trustmsg.inbox.group or spring.kafka.consumer.group-id");
    }
    this.group = consumerGroup;
  }

  public String consumerGroup() {
    return group;
  }

  /** The record's trustmsg message id; empty when it has no usable {@code trustmsg-message-id}. */
  public static OptionalLong messageId(ConsumerRecord<?, ?> record) {
    Header h = record.headers().lastHeader(Inbox.MESSAGE_ID_HEADER);
    return h == null ? OptionalLong.empty() : Inbox.parseMessageId(h.value());
  }

  /**
   * Runs {@code work} once for the record's message.
   *
   * @throws IllegalArgumentException the record has no usable {@code trustmsg-message-id}
   */
  public <T> Processed<T> process(ConsumerRecord<?, ?> record, TransactionCallback<T> work) {
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
    return process(id, work);
  }

  /** Runs {@code work} once for {@code messageId} in this group. */
  public <T> Processed<T> process(long messageId, TransactionCallback<T> work) {
    Objects.requireNonNull(work, "work");
    return transactions.execute(
        status -> {
          boolean first;
          try {
            first = Inbox.insert(DataSourceUtils.getConnection(dataSource), group, messageId);
          } catch (SQLException e) {
            throw new InboxException("inserting the inbox row", e);
          }
          if (!first) {
            status.setRollbackOnly();
            return Processed.<T>repeat();
          }
          return Processed.done(work.doInTransaction(status));
        });
  }
}
