package io.trustmsg.client;

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.Objects;
import java.util.OptionalLong;
import javax.sql.DataSource;

/**
 * The consumer's inbox: Kafka delivers at least once, so a record may come again; the inbox records
 * each {@code trustmsg-message-id} processed by a consumer group ({@code trustmsg_inbox}) in the
 * same local transaction as the work, so the work happens once: a repeat is skipped, and a failed
 * work leaves no inbox row (the record is processed again later).
 *
 * <pre>{@code
 * Inbox inbox = new Inbox(dataSource, "billing");
 * Processed<Void> p = inbox.process(messageId, conn -> { … insert the invoice on conn …; return null; });
 * }</pre>
 *
 * <p>Message ids are unsigned 64-bit integers, held in a {@code long} as its bits ({@link
 * Long#toUnsignedString}). PostgreSQL's {@code BIGINT} holds ids up to 2^63-1 (every id trustmsg
 * issues).
 */
public final class Inbox {
  /** The table's name. */
  public static final String TABLE = "trustmsg_inbox";

  /** The header trustmsg puts on every record it delivers. */
  public static final String MESSAGE_ID_HEADER = "trustmsg-message-id";

  private final DataSource dataSource;
  private final String group;

  /**
   * @param consumerGroup the consumer group whose processing this records (1 to 255 bytes): two
   *     groups each process every message once
   */
  public Inbox(DataSource dataSource, String consumerGroup) {
    this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
    checkGroup(consumerGroup);
    this.group = consumerGroup;
  }

  public String consumerGroup() {
    return group;
  }

  /**
   * The message id of a {@code trustmsg-message-id} header value: decimal digits of an unsigned
   * 64-bit integer; empty for anything else (no value, a sign, not a number, beyond 64 bits).
   */
  public static OptionalLong parseMessageId(String headerValue) {
    if (headerValue == null || headerValue.isEmpty() || headerValue.length() > 20) {
      return OptionalLong.empty();
    }
    for (int i = 0; i < headerValue.length(); i++) {
      char c = headerValue.charAt(i);
      if (c < '0' || c > '9') {
        return OptionalLong.empty();
      }
    }
    try {
      return OptionalLong.of(Long.parseUnsignedLong(headerValue));
    } catch (NumberFormatException e) {
      return OptionalLong.empty();
    }
  }

  /** As {@link #parseMessageId(String)} for the header's bytes (UTF-8; null: no value). */
  public static OptionalLong parseMessageId(byte[] headerValue) {
    return headerValue == null
        ? OptionalLong.empty()
        : parseMessageId(new String(headerValue, StandardCharsets.UTF_8));
  }

  /**
   * Runs {@code work} once for {@code messageId} in this group: in a new local transaction on a
   * connection of the data source, the inbox row first, then the work, then COMMIT. A repeat (the
   * row exists) runs nothing. Thrown by {@code work}: rolled back (no inbox row) and rethrown.
   *
   * @throws InboxException the database failed (rolled back)
   */
  public <T, X extends Exception> Processed<T> process(long messageId, JdbcWork<T, X> work)
      throws X {
    Objects.requireNonNull(work, "work");
    Connection c;
    try {
      c = dataSource.getConnection();
    } catch (SQLException e) {
      throw new InboxException("opening a connection for the inbox", e);
    }
    try (c) {
      boolean auto = c.getAutoCommit();
      c.setAutoCommit(false);
      try {
        boolean first;
        T value;
        try {
          first = insert(c, group, messageId);
          if (!first) {
            c.rollback();
            return Processed.repeat();
          }
          value = work.run(c);
        } catch (Exception | Error e) {
          Barrier.rollbackQuietly(c, e);
          if (e instanceof SQLException sql) {
            throw new InboxException("the inbox's transaction failed (rolled back)", sql);
          }
          throw e;
        }
        c.commit();
        return Processed.done(value);
      } finally {
        c.setAutoCommit(auto);
      }
    } catch (SQLException e) {
      throw new InboxException("the inbox's transaction failed", e);
    }
  }

  /**
   * Inserts the inbox row of {@code messageId} for {@code group} on {@code connection}, inside the
   * caller's open transaction (e.g. one Spring manages): true the first time, false for a repeat
   * (then roll back, or simply skip the work). While another transaction holding the same row is
   * open, it waits for it.
   */
  public static boolean insert(Connection connection, String group, long messageId)
      throws SQLException {
    checkGroup(group);
    Dialect dialect = Dialect.of(connection);
    if (dialect == Dialect.POSTGRES) {
      if (messageId <= 0) {
        throw new IllegalArgumentException(
            "message id "
                + Long.toUnsignedString(messageId)
                + " does not fit trustmsg_inbox on PostgreSQL (BIGINT, 1 to 2^63-1)");
      }
      try (PreparedStatement st =
          connection.prepareStatement(
              "INSERT INTO trustmsg_inbox (consumer_group, message_id) VALUES (?, ?) "
                  + "ON CONFLICT (consumer_group, message_id) DO NOTHING")) {
        st.setString(1, group);
        st.setLong(2, messageId);
        return st.executeUpdate() == 1;
      }
    }
    try (PreparedStatement st =
        connection.prepareStatement(
            "INSERT INTO trustmsg_inbox (consumer_group, message_id) VALUES (?, ?)")) {
      st.setString(1, group);
      if (messageId >= 0) {
        st.setLong(2, messageId);
      } else {
        st.setBigDecimal(2, new BigDecimal(Long.toUnsignedString(messageId)));
      }
      st.executeUpdate();
      return true;
    } catch (SQLException e) {
      if (Dialect.isDuplicate(e)) {
        return false;
      }
      throw e;
    }
  }

  static void checkGroup(String group) {
    Objects.requireNonNull(group, "consumerGroup");
    int n = group.getBytes(StandardCharsets.UTF_8).length;
    if (n < 1 || n > 255) {
      throw new IllegalArgumentException("a consumer group is 1 to 255 bytes (got " + n + ")");
    }
  }
}
