package io.trustmsg.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.sun.net.httpserver.HttpServer;
import io.trustmsg.testkit.Kit;
import java.net.InetSocketAddress;
import java.time.Duration;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/** The README's 20-line example, as it is written there, against the kit's trustmsg and MariaDB. */
class ReadmeQuickstartTest {

  @Test
  void theReadmeExampleRuns() throws Exception {
    Kit.require();
    DataSource db = Kit.Db.MYSQL.dataSource();
    String url = Kit.url();
    // README: HttpServer.create(new InetSocketAddress("127.0.0.1", 3000), 0); here a free port.
    var server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    int port = server.getAddress().getPort();
    Kit.Producer p =
        Kit.register(Kit.unique("java-readme"), "http://127.0.0.1:" + port + "/trustmsg/check");
    String token = p.token();
    String secret = p.secret();
    String id = Kit.unique("A");

    // --- README: "In 20 lines" (the env lookups replaced by the kit's values) ---
    Barrier.createTables(db); // trustmsg_barrier, trustmsg_inbox (idempotent)
    try (var c = db.getConnection();
        var st = c.createStatement()) {
      st.execute(
          "CREATE TABLE IF NOT EXISTS shop_orders (id VARCHAR(64) PRIMARY KEY, cents BIGINT NOT NULL)");
    }
    var trustmsg = TrustmsgClient.builder(url, p.bizId(), token).build();
    var barrier = new Barrier(db);
    var template = new TrustmsgTransactionTemplate(trustmsg, barrier);

    server.createContext(CheckBackHandler.DEFAULT_PATH, new CheckBackHandler(secret, barrier));
    server.start();

    Message placed =
        Message.builder(id, "orders")
            .payload("{\"order\":\"" + id + "\",\"amount_cents\":1250}")
            .key("alice")
            .header("content-type", "application/json")
            .build();
    for (int run = 1; run <= 2; run++) { // the README's program, run twice
      try {
        template.execute(
            placed,
            conn -> {
              try (var st =
                  conn.prepareStatement("INSERT INTO shop_orders (id, cents) VALUES (?, ?)")) {
                st.setString(1, id);
                st.setLong(2, 1250);
                st.executeUpdate();
              }
              return null;
            });
        assertEquals(1, run, "the second run placed the order again");
      } catch (AlreadyCommittedException e) {
        assertEquals(2, run);
        assertEquals(trustmsg.get(id).id(), e.view().map(v -> v.id()).orElse(null));
      }
    }
    // --- end of the README's example ---

    try {
      assertEquals("COMMITTED", trustmsg.get(id).status());
      assertEquals(1, Kit.count(db, "SELECT COUNT(*) FROM shop_orders WHERE id = ?", id));
      // The check endpoint it serves answers trustmsg's check-back for a commit that never came.
      String lost = Kit.unique("A");
      trustmsg.prepare(Message.builder(lost, "orders").payload("{}").build());
      barrier.runInTransaction(p.bizId(), lost, conn -> null);
      Kit.eventually(
          Duration.ofSeconds(40),
          "check-back commits " + lost,
          () -> trustmsg.get(lost).isCommitted() ? true : null);
    } finally {
      server.stop(0);
    }
  }
}
