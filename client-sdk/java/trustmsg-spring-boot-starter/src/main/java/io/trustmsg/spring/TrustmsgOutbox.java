package io.trustmsg.spring;

import io.trustmsg.client.LocalMessageTable;
import io.trustmsg.client.Message;
import java.sql.SQLException;
import java.util.Objects;
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

  public TrustmsgOutbox(DataSource dataSource, LocalMessageTable table) {
    this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
    this.table = Objects.requireNonNull(table, "table");
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
      return table.insert(DataSourceUtils.getConnection(dataSource), message);
    } catch (SQLException e) {
      throw new org.springframework.jdbc.UncategorizedSQLException(
          "writing " + message.messageKey() + " to the local message table", null, e);
    }
  }

  /** The table it writes. */
  public LocalMessageTable table() {
    return table;
  }
}
