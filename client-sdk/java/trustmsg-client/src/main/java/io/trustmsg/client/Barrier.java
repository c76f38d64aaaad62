package io.trustmsg.client;

import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Objects;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The barrier: one marker row per message in the producer's own database ({@code
 * trustmsg_barrier}), MySQL/MariaDB or PostgreSQL.
 *
 * <p>The local transaction inserts a {@code commit} marker ({@link #insert}) with its business
 * rows. A check-back inserts a {@code rollback} marker unless one exists ({@link #check}); while
 * the local transaction is still open, that insert waits on its row lock and then sees what the
 * transaction did. So the answer is exact: commit if and only if the business rows committed. Keys
 * compare byte for byte. Every value is bound as a parameter.
 */
public final class Barrier implements CheckBackDecider {
  private static final Logger log = LoggerFactory.getLogger(Barrier.class);

  /** The table's name. */
  public static final String TABLE = "trustmsg_barrier";

  private final DataSource dataSource;

  /** A barrier in {@code dataSource}'s database (its tables made by {@link #createTables}). */
  public Barrier(DataSource dataSource) {
    this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
  }

  public DataSource dataSource() {
    return dataSource;
  }

  /**
   * Creates the barrier and inbox tables if they do not exist (client-sdk/conformance/sql/, the
   * same tables every trustmsg SDK uses). Idempotent.
   */
  public static void createTables(Connection connection) throws SQLException {
    Dialect dialect = Dialect.of(connection);
    dialect.runScript(connection, dialect.tablesSql());
  }

  public static void createTables(DataSource dataSource) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      boolean auto = c.getAutoCommit();
      c.setAutoCommit(true);
      try {
        createTables(c);
      } finally {
        c.setAutoCommit(auto);
      }
    }
  }

  /**
   * Inserts the commit marker of {@code messageKey} on {@code connection}, inside the caller's open
   * local transaction: it commits or rolls back with the business rows.
   *
   * @throws AlreadyDecidedException a marker exists (a check-back rolled the message back first, or
   *     the key was committed before): roll the transaction back
   * @throws SQLException the database failed
   */
  public static void insert(Connection connection, String bizId, String messageKey)
      throws SQLException {
    checkKeys(bizId, messageKey);
    Dialect dialect = Dialect.of(connection);
    if (dialect == Dialect.POSTGRES) {
      try (PreparedStatement st =
          connection.prepareStatement(
              "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (?, ?, 'commit') "
                  + "ON CONFLICT (biz_id, message_key) DO NOTHING")) {
        st.setString(1, bizId);
        st.setString(2, messageKey);
        if (st.executeUpdate() == 1) {
          return;
        }
      }
    } else {
      try (PreparedStatement st =
          connection.prepareStatement(
              "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (?, ?, 'commit')")) {
        st.setString(1, bizId);
        st.setString(2, messageKey);
        st.executeUpdate();
        return;
      } catch (SQLException e) {
        if (!Dialect.isDuplicate(e)) {
          throw e;
        }
      }
    }
    String lock = dialect == Dialect.POSTGRES ? " FOR SHARE" : " LOCK IN SHARE MODE";
    throw new AlreadyDecidedException(
        bizId, messageKey, readOp(connection, bizId, messageKey, lock));
  }

  /**
   * What the local transaction of {@code messageKey} did, for a check-back: inserts a rollback
   * marker unless a marker exists (waiting while a local transaction holding the key is open), then
   * answers the marker that is there. On its own connection, in autocommit.
   */
  public Decision check(String bizId, String messageKey) throws SQLException {
    checkKeys(bizId, messageKey);
    try (Connection c = dataSource.getConnection()) {
      boolean auto = c.getAutoCommit();
      if (!auto) {
        c.setAutoCommit(true);
      }
      try {
        String sql =
            Dialect.of(c) == Dialect.POSTGRES
                ? "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (?, ?, 'rollback') "
                    + "ON CONFLICT (biz_id, message_key) DO NOTHING"
                : "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (?, ?, 'rollback') "
                    + "ON DUPLICATE KEY UPDATE op = op";
        try (PreparedStatement st = c.prepareStatement(sql)) {
          st.setString(1, bizId);
          st.setString(2, messageKey);
          st.executeUpdate();
        }
        return readOp(c, bizId, messageKey, "");
      } finally {
        if (!auto) {
          c.setAutoCommit(false);
        }
      }
    }
  }

  /** Answers a check-back from the barrier ({@link #check}). */
  @Override
  public Decision decide(CheckRequest request) throws SQLException {
    return check(request.bizId(), request.messageKey());
  }

  /**
   * Runs {@code work} in a new local transaction on a connection of the data source, with the
   * commit marker of {@code messageKey} inserted first, and commits it. Thrown by {@code work}:
   * rolled back and rethrown as it is.
   *
   * @throws AlreadyDecidedException the marker exists (rolled back, {@code work} not run)
   * @throws OutcomeUnknownException the COMMIT's outcome is unknown and the barrier unreadable
   * @throws BarrierException another database failure (rolled back)
   */
  public <T, X extends Exception> T runInTransaction(
      String bizId, String messageKey, JdbcWork<T, X> work) throws X {
    Objects.requireNonNull(work, "work");
    checkKeys(bizId, messageKey);
    Connection c;
    try {
      c = dataSource.getConnection();
    } catch (SQLException e) {
      throw new BarrierException("opening a connection for the local transaction", e);
    }
    try {
      boolean auto = c.getAutoCommit();
      c.setAutoCommit(false);
      try {
        T value;
        try {
          insert(c, bizId, messageKey);
          value = work.run(c);
        } catch (Exception | Error e) {
          rollbackQuietly(c, e);
          if (e instanceof SQLException sql) {
            throw new BarrierException("local transaction of " + messageKey + " failed", sql);
          }
          throw e;
        }
        try {
          c.commit();
        } catch (SQLException commitError) {
          afterFailedCommit(bizId, messageKey, commitError);
        }
        return value;
      } finally {
        try {
          c.setAutoCommit(auto);
        } catch (SQLException ignored) {
          // the connection is closed below; a broken one is the pool's to discard
        }
      }
    } catch (SQLException e) {
      throw new BarrierException("local transaction of " + messageKey + " failed", e);
    } finally {
      try {
        c.close();
      } catch (SQLException ignored) {
        // nothing left to do with it
      }
    }
  }

  /** A COMMIT that failed may have committed: the barrier says. */
  private void afterFailedCommit(String bizId, String messageKey, SQLException commitError) {
    Decision d;
    try {
      d = check(bizId, messageKey);
    } catch (SQLException checkError) {
      commitError.addSuppressed(checkError);
      log.error("local COMMIT of {}/{} has an unknown outcome", bizId, messageKey, commitError);
      throw new OutcomeUnknownException(
          "the local COMMIT of "
              + messageKey
              + " failed and the barrier could not be read; "
              + "check-back will decide",
          commitError);
    }
    if (d != Decision.COMMIT) {
      throw new BarrierException("the local COMMIT of " + messageKey + " failed", commitError);
    }
  }

  /** Deletes markers older than {@code age} (check-back has long been settled for them). */
  public long purgeOlderThan(Duration age) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      c.setAutoCommit(true);
      String sql =
          Dialect.of(c) == Dialect.POSTGRES
              ? "DELETE FROM trustmsg_barrier WHERE created_at < now() - (? * INTERVAL '1 millisecond')"
              : "DELETE FROM trustmsg_barrier WHERE created_at < CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND";
      try (PreparedStatement st = c.prepareStatement(sql)) {
        st.setLong(1, Dialect.of(c) == Dialect.POSTGRES ? age.toMillis() : age.toNanos() / 1000);
        return st.executeLargeUpdate();
      }
    }
  }

  private static Decision readOp(Connection c, String bizId, String messageKey, String lock)
      throws SQLException {
    try (PreparedStatement st =
        c.prepareStatement(
            "SELECT op FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ?" + lock)) {
      st.setString(1, bizId);
      st.setString(2, messageKey);
      try (ResultSet rs = st.executeQuery()) {
        if (!rs.next()) {
          throw new SQLException("no barrier marker for " + bizId + "/" + messageKey);
        }
        String op = rs.getString(1);
        return switch (op) {
          case "commit" -> Decision.COMMIT;
          case "rollback" -> Decision.ROLLBACK;
          default -> throw new SQLException("unexpected barrier marker " + op + " in " + TABLE);
        };
      }
    }
  }

  static void checkKeys(String bizId, String messageKey) {
    Objects.requireNonNull(bizId, "bizId");
    Objects.requireNonNull(messageKey, "messageKey");
    int b = bizId.getBytes(StandardCharsets.UTF_8).length;
    if (b < 1 || b > 64) {
      throw new IllegalArgumentException("bizId must be 1 to 64 bytes (got " + b + ")");
    }
    int k = messageKey.getBytes(StandardCharsets.UTF_8).length;
    if (k < 1 || k > 128) {
      throw new IllegalArgumentException(
          "message_key must be 1 to 128 bytes of UTF-8 (got "
              + k
              + "): the barrier's column holds no more");
    }
  }

  static void rollbackQuietly(Connection c, Throwable failure) {
    try {
      c.rollback();
    } catch (SQLException e) {
      failure.addSuppressed(e);
    }
  }
}
