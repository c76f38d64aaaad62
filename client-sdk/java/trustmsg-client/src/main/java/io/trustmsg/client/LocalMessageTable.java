package io.trustmsg.client;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Clock;
import java.time.Instant;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * The local message table (docs/outbox.md): write the message as a row of {@code trustmsg_outbox}
 * in the same local transaction as the business change, and trustmsg's relay ({@code
 * --outbox-source}) delivers it once that transaction commits. No call to trustmsg on the request
 * path, no check-back.
 *
 * <pre>{@code
 * conn.setAutoCommit(false);
 * // … UPDATE orders …
 * LocalMessageTable.enqueue(conn, message);
 * conn.commit();
 * }</pre>
 *
 * <p>MySQL/MariaDB and PostgreSQL. The message is checked against trustmsg's rules before anything
 * is written ({@link InvalidRequestException} with the API's code); every value is bound.
 */
public final class LocalMessageTable {
  /** The table's default name. */
  public static final String DEFAULT_TABLE = "trustmsg_outbox";

  private static final Pattern TABLE = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,63}");

  private final String table;
  private final Clock clock;

  /** The table {@code trustmsg_outbox}. */
  public LocalMessageTable() {
    this(DEFAULT_TABLE, Clock.systemUTC());
  }

  /**
   * @param table the table's name, as {@code --outbox-table} gives it to the relay: 1 to 64 of
   *     {@code A-Z a-z 0-9 _}, not starting with a digit
   */
  public LocalMessageTable(String table, Clock clock) {
    Objects.requireNonNull(table, "table");
    if (!TABLE.matcher(table).matches()) {
      throw InvalidRequestException.refused(
          "invalid_table",
          table
              + " is not a table name the relay accepts: 1 to 64 of A-Z a-z 0-9 _, not starting with a digit");
    }
    this.table = table;
    this.clock = Objects.requireNonNull(clock, "clock");
  }

  /** Writes {@code message} to {@code trustmsg_outbox} on {@code connection}. */
  public static long enqueue(Connection connection, Message message) throws SQLException {
    return new LocalMessageTable().insert(connection, message);
  }

  /** Creates the table if it does not exist ({@code trustmsg outbox schema}'s SQL). */
  public static void createTable(Connection connection) throws SQLException {
    Dialect dialect = Dialect.of(connection);
    dialect.runScript(connection, dialect.outboxSql());
  }

  /**
   * Writes {@code message} as a row on {@code connection}, inside the caller's transaction: it is
   * relayed if and only if that transaction commits.
   *
   * @return the row's id
   * @throws InvalidRequestException trustmsg would refuse the message (nothing written)
   */
  public long insert(Connection connection, Message message) throws SQLException {
    Objects.requireNonNull(connection, "connection");
    MessageRules.check(message);
    Instant at =
        message.deliverAt().map(t -> MessageRules.checkDeliverAt(t, clock.instant())).orElse(null);
    Long afterMs = message.deliverAfter().map(MessageRules::checkDelay).orElse(null);
    String headers = message.headers().isEmpty() ? null : Json.writeString(message.headers());
    String traceparent = MessageRules.validTraceparent(message.traceHeaders().get("traceparent"));
    Dialect dialect = Dialect.of(connection);
    String sql =
        dialect == Dialect.POSTGRES
            ? "INSERT INTO "
                + table
                + " (message_key, topic, record_key, payload, headers, traceparent, deliver_at) "
                + "VALUES (?, ?, ?, ?, CAST(? AS JSONB), ?, "
                + "COALESCE(CAST(? AS TIMESTAMPTZ), now() + CAST(? AS BIGINT) * INTERVAL '1 millisecond'))"
            : "INSERT INTO "
                + table
                + " (message_key, topic, record_key, payload, headers, traceparent, deliver_at) "
                + "VALUES (?, ?, ?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND))";
    try (PreparedStatement st = connection.prepareStatement(sql, Statement.RETURN_GENERATED_KEYS)) {
      st.setString(1, message.messageKey());
      st.setString(2, message.topic());
      st.setString(3, message.key().orElse(null));
      st.setBytes(4, message.payloadRef());
      st.setString(5, headers);
      st.setString(6, traceparent);
      if (dialect == Dialect.POSTGRES) {
        if (at == null) {
          st.setNull(7, Types.TIMESTAMP_WITH_TIMEZONE);
        } else {
          st.setObject(7, at.atOffset(java.time.ZoneOffset.UTC));
        }
        setLong(st, 8, afterMs);
      } else {
        // DATETIME(3) in UTC: the wall-clock time of the instant at UTC, as text.
        st.setString(
            7,
            at == null
                ? null
                : Timestamp.valueOf(java.time.LocalDateTime.ofInstant(at, java.time.ZoneOffset.UTC))
                    .toString());
        setLong(st, 8, afterMs == null ? null : afterMs * 1000);
      }
      st.executeUpdate();
      try (ResultSet keys = st.getGeneratedKeys()) {
        return keys.next() ? keys.getLong(1) : 0;
      }
    }
  }

  private static void setLong(PreparedStatement st, int i, Long v) throws SQLException {
    if (v == null) {
      st.setNull(i, Types.BIGINT);
    } else {
      st.setLong(i, v);
    }
  }
}
