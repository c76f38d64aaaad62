package io.trustmsg.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.trustmsg.testkit.Kit;
import java.net.URI;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * The SDK's tables made by several instances at once: two CREATE TABLE IF NOT EXISTS of one table
 * at once can fail on PostgreSQL's catalog (23505 on pg_type); every instance of a service that
 * starts with createTables must succeed, and the tables are there once.
 */
class TablesTest {
  @Test
  void eightInstancesCreateTheTablesAtOnceOnAnEmptyPostgresDatabase() throws Exception {
    String url = Kit.env("TRUSTMSG_KIT_POSTGRES_URL");
    String name = "java_ddl_" + UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    DataSource admin = Kit.dataSource(url);
    try (Connection c = admin.getConnection();
        Statement st = c.createStatement()) {
      st.execute("CREATE DATABASE " + name);
    }
    URI u = URI.create(url);
    DataSource fresh =
        Kit.dataSource(
            new URI(
                    u.getScheme(),
                    u.getRawUserInfo(),
                    u.getHost(),
                    u.getPort(),
                    "/" + name,
                    null,
                    null)
                .toString());
    ExecutorService pool = Executors.newFixedThreadPool(8);
    try {
      CyclicBarrier start = new CyclicBarrier(8);
      List<Future<?>> instances = new ArrayList<>();
      for (int i = 0; i < 8; i++) {
        instances.add(
            pool.submit(
                () -> {
                  try (Connection c = fresh.getConnection()) {
                    start.await();
                    Barrier.createTables(c);
                    LocalMessageTable.createTable(c);
                  }
                  return null;
                }));
      }
      for (Future<?> f : instances) {
        f.get();
      }
      try (Connection c = fresh.getConnection();
          Statement st = c.createStatement();
          ResultSet rs =
              st.executeQuery(
                  "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public' AND tablename IN "
                      + "('trustmsg_barrier', 'trustmsg_inbox', 'trustmsg_outbox')")) {
        rs.next();
        assertEquals(3, rs.getInt(1));
      }
    } finally {
      pool.shutdownNow();
      try (Connection c = admin.getConnection();
          Statement st = c.createStatement()) {
        st.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      }
    }
  }
}
