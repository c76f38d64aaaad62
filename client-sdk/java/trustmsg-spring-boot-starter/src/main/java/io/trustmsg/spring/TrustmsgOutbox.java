package io.trustmsg.spring;

import io.trustmsg.client.LocalMessageTable;
import io.trustmsg.client.Message;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.LongAdder;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.transaction.IllegalTransactionStateException;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The local message table (docs/outbox.md) in a Spring-managed transaction: {@link #enqueue} writes
 * the message as a row of {@code trustmsg_outbox} on the connection of the current transaction
 * (Spring's {@link DataSourceUtils#getConnection}), so it commits or rolls back with what your
 * {@code JdbcTemplate}, JPA or jOOQ code writes there, and trustmsg's relay ({@code
 * --outbox-source}) delivers it once the transaction commits.
 *
 * <pre>{@code
 * @Transactional
 * public void ship(String orderId) {
 *   jdbc.update("UPDATE orders SET shipped = true WHERE id = ?", orderId);
 *   outbox.enqueue(Message.builder("shipped-" + orderId, "orders.shipped").payload("…").build());
 * }
 * }</pre>
 */
public class TrustmsgOutbox {
  private final DataSource dataSource;
  private final LocalMessageTable table;
  private final String tableName;
  private final LongAdder enqueued = new LongAdder();

  /** The outbox on {@code dataSource}'s table {@code trustmsg_outbox}. */
  public TrustmsgOutbox(DataSource dataSource, LocalMessageTable table) {
    this(dataSource, table, LocalMessageTable.DEFAULT_TABLE);
  }

  /**
   * The outbox on {@code dataSource}, writing through {@code table} whose name is {@code tableName}
   * (read by {@link #pending()}).
   */
  public TrustmsgOutbox(DataSource dataSource, LocalMessageTable table, String tableName) {
    this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
    this.table = Objects.requireNonNull(table, "table");
    this.tableName = Objects.requireNonNull(tableName, "tableName");
  }

  /**
   * Writes {@code message} in the current transaction.
   *
   * @return the row's id
   * @throws IllegalTransactionStateException no transaction is active (a row written outside one
   *     would be relayed whatever happens to the business change)
   * @throws io.trustmsg.client.InvalidRequestException trustmsg would refuse the message (nothing
   *     written)
   * @throws org.springframework.dao.DataAccessException the database failed
   */
  public long enqueue(Message message) {
    if (!TransactionSynchronizationManager.isActualTransactionActive()) {
      throw new IllegalTransactionStateException(
          "TrustmsgOutbox.enqueue needs a transaction (@Transactional or a TransactionTemplate): "
              + "the row must commit with the business change");
    }
    try {
      long id = table.insert(DataSourceUtils.getConnection(dataSource), message);
      enqueued.increment();
      return id;
    } catch (SQLException e) {
      throw new org.springframework.jdbc.UncategorizedSQLException(
          "writing " + message.messageKey() + " to the local message table", null, e);
    }
  }

  /** The table it writes. */
  public LocalMessageTable table() {
    return table;
  }

  /** How many rows this outbox has written (in transactions that committed or not). */
  public long enqueuedCount() {
    return enqueued.sum();
  }

  /**
   * The rows the relay has not relayed yet (status 0, committed by any process), and when the
   * oldest of them was written: what the metrics and the health indicator show.
   *
   * @throws SQLException the database failed (the table is missing, …)
   */
  public Pending pending() throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement st =
            c.prepareStatement(
                "SELECT COUNT(*), MIN(gmt_create) FROM " + tableName + " WHERE status = 0");
        ResultSet rs = st.executeQuery()) {
      rs.next();
      Timestamp oldest = rs.getTimestamp(2);
      return new Pending(rs.getLong(1), Optional.ofNullable(oldest).map(Timestamp::toInstant));
    }
  }

  /**
   * The outbox's unrelayed rows.
   *
   * @param rows how many rows wait (status 0)
   * @param oldest when the oldest of them was written, as the database's clock read it (empty when
   *     none waits)
   */
  public record Pending(long rows, Optional<Instant> oldest) {}
}
