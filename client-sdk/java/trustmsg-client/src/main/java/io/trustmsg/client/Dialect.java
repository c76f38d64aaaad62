package io.trustmsg.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** The producer databases the SDK's tables live in. */
public enum Dialect {
  /** MySQL 8.0 or later, MariaDB 10.6 or later. */
  MYSQL,
  /** PostgreSQL 13 or later. */
  POSTGRES;

  /** The dialect of the database {@code connection} talks to. */
  public static Dialect of(Connection connection) throws SQLException {
    String product = connection.getMetaData().getDatabaseProductName();
    String p = product == null ? "" : product.toLowerCase(Locale.ROOT);
    if (p.contains("mysql") || p.contains("mariadb")) {
      return MYSQL;
    }
    if (p.contains("postgres")) {
      return POSTGRES;
    }
    throw new SQLException(
        "trustmsg's tables live in MySQL/MariaDB or PostgreSQL; this connection is to " + product);
  }

  /** The barrier and inbox tables' SQL (client-sdk/conformance/sql/, the same for every SDK). */
  public String tablesSql() {
    return resource("sql/" + (this == MYSQL ? "mysql" : "postgres") + ".sql");
  }

  /** The local message table's SQL ({@code trustmsg outbox schema --dialect …}). */
  public String outboxSql() {
    return resource("outbox/" + (this == MYSQL ? "mysql" : "postgres") + ".sql");
  }

  static String resource(String name) {
    try (InputStream in = Dialect.class.getResourceAsStream(name)) {
      if (in == null) {
        throw new IllegalStateException("trustmsg-client's resource " + name + " is missing");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new IllegalStateException("reading trustmsg-client's resource " + name, e);
    }
  }

  /** Runs a script of statements separated by {@code ;} (no {@code ;} inside a statement). */
  void runScript(Connection connection, String script) throws SQLException {
    if (this == MYSQL) {
      try (Statement st = connection.createStatement()) {
        for (String sql : statements(script)) {
          st.execute(sql);
        }
      }
      return;
    }
    // On PostgreSQL, one transaction behind the lock every trustmsg SDK takes: two CREATE TABLE
    // IF NOT EXISTS of one table at once can fail there (23505 on pg_type), as two instances of
    // a service starting together do. In the caller's open transaction, the lock lasts until it
    // ends.
    boolean auto = connection.getAutoCommit();
    connection.setAutoCommit(false);
    try (Statement st = connection.createStatement()) {
      st.execute(DDL_LOCK);
      for (String sql : statements(script)) {
        st.execute(sql);
      }
      if (auto) {
        connection.commit();
      }
    } catch (SQLException | RuntimeException e) {
      if (auto) {
        connection.rollback();
      }
      throw e;
    } finally {
      if (auto) {
        connection.setAutoCommit(true);
      }
    }
  }

  /** The advisory lock taken while tables are created on PostgreSQL ("trustmsg" as a bigint). */
  static final String DDL_LOCK = "SELECT pg_advisory_xact_lock(8390898194479674215)";

  static List<String> statements(String script) {
    StringBuilder code = new StringBuilder();
    for (String line : script.split("\n", -1)) {
      int comment = line.indexOf("--");
      code.append(comment >= 0 ? line.substring(0, comment) : line).append('\n');
    }
    List<String> out = new ArrayList<>();
    for (String s : code.toString().split(";")) {
      if (!s.isBlank()) {
        out.add(s.trim());
      }
    }
    return out;
  }

  /** A unique-key violation (23000 on MySQL with error 1062, 23505 on PostgreSQL). */
  static boolean isDuplicate(SQLException e) {
    for (SQLException s = e; s != null; s = s.getNextException()) {
      if ("23505".equals(s.getSQLState()) || s.getErrorCode() == 1062) {
        return true;
      }
    }
    return false;
  }
}
