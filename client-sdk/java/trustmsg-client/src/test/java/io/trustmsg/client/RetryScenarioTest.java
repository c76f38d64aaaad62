package io.trustmsg.client;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import io.trustmsg.testkit.Kit;
import io.trustmsg.testkit.Kit.Db;
import io.trustmsg.testkit.Topics;
import java.net.InetSocketAddress;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The kit's scenarios S11-S14: a client retrying an order (after a rollback, after a crash right
 * after the local COMMIT, twice at the same moment, after it went through), against the real
 * trustmsg, MariaDB, PostgreSQL and Kafka.
 */
class RetryScenarioTest {
  private static final Duration KAFKA_WAIT = Duration.ofSeconds(45);

  @BeforeAll
  static void kit() throws SQLException {
    Kit.require();
    for (Db db : Db.values()) {
      DataSource ds = db.dataSource();
      Barrier.createTables(ds);
      Kit.execute(
          ds,
          "CREATE TABLE IF NOT EXISTS java_orders (id VARCHAR(64) PRIMARY KEY, total INT NOT NULL)");
    }
  }

  private static TrustmsgClient client(Kit.Producer p) {
    return TrustmsgClient.builder(Kit.url(), p.bizId(), p.token()).build();
  }

  private static void insertOrder(Connection c, String id, int total) throws SQLException {
    try (PreparedStatement st =
        c.prepareStatement("INSERT INTO java_orders (id, total) VALUES (?, ?)")) {
      st.setString(1, id);
      st.setInt(2, total);
      st.executeUpdate();
    }
  }

  private static long orders(DataSource ds, String id) throws SQLException {
    return Kit.count(ds, "SELECT COUNT(*) FROM java_orders WHERE id = ?", id);
  }

  private static long markers(DataSource ds, String bizId, String key, String op)
      throws SQLException {
    return Kit.count(
        ds,
        "SELECT COUNT(*) FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ? AND op = ?",
        bizId,
        key,
        op);
  }

  /**
   * Every record of {@code topic} that the tests' messages (message key = record key = each of
   * {@code keys}) put there: once each committed one is SENT, a sentinel record is committed under
   * each record key (the same partition, after it), and the topic is read until every sentinel is
   * seen. What is returned has no sentinel.
   */
  private static List<ConsumerRecord<byte[], byte[]>> recordsOf(
      TrustmsgClient trustmsg, String topic, String... keys) {
    for (String k : keys) {
      Kit.eventually(
          Duration.ofSeconds(40),
          k + " sent or rolled back",
          () -> {
            MessageView v = trustmsg.get(k);
            return v.isSent() || v.isRolledBack() ? v : null;
          });
    }
    List<String> sentinels = new ArrayList<>();
    for (String k : keys) {
      String sentinel = Kit.unique("sentinel");
      sentinels.add(sentinel);
      Transactions.run(
          trustmsg, Message.builder(sentinel, topic).key(k).payload(sentinel).build(), p -> null);
    }
    List<ConsumerRecord<byte[], byte[]>> all =
        Topics.readUntil(
            topic,
            KAFKA_WAIT,
            rs ->
                sentinels.stream()
                    .allMatch(
                        s -> rs.stream().anyMatch(r -> s.equals(new String(r.value(), UTF_8)))));
    return all.stream().filter(r -> !sentinels.contains(new String(r.value(), UTF_8))).toList();
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S11_a_retry_after_a_rollback_is_refused_before_any_local_work(Db db) throws Exception {
    DataSource ds = db.dataSource();
    Kit.Producer p = Kit.register(Kit.unique("java-s11"), "http://127.0.0.1:9/unused");
    TrustmsgClient trustmsg = client(p);
    var template = new TrustmsgTransactionTemplate(trustmsg, new Barrier(ds));
    String topic = Kit.unique("java.s11");
    String key = Kit.unique("order");
    Message order = Message.builder(key, topic).key(key).payload("s11").build();
    assertThrows(
        IllegalStateException.class,
        () ->
            template.execute(
                order,
                conn -> {
                  insertOrder(conn, key, 11);
                  throw new IllegalStateException("the card was declined");
                }));
    assertEquals("ROLLED_BACK", trustmsg.get(key).status());

    AtomicBoolean ran = new AtomicBoolean();
    var e =
        assertThrows(
            AlreadyRolledBackException.class,
            () ->
                template.execute(
                    order,
                    conn -> {
                      ran.set(true);
                      insertOrder(conn, key, 11);
                      return key;
                    }));
    assertFalse(ran.get(), "the local work ran for a rolled-back message");
    assertEquals("ROLLED_BACK", e.messageStatus());
    ConflictException refused = assertInstanceOf(ConflictException.class, e.getCause());
    assertEquals("already_rolled_back", refused.code().orElseThrow(), "trustmsg's answer");
    assertEquals(0, orders(ds, key));
    assertEquals(0, markers(ds, p.bizId(), key, "commit"));

    // The plain helper, without the barrier, refuses the same way.
    String plainKey = Kit.unique("plain");
    Message plain = Message.builder(plainKey, topic).key(plainKey).payload("s11").build();
    assertThrows(
        IllegalStateException.class,
        () ->
            Transactions.run(
                trustmsg,
                plain,
                prepared -> {
                  throw new IllegalStateException("declined");
                }));
    assertThrows(
        AlreadyRolledBackException.class,
        () ->
            Transactions.run(
                trustmsg,
                plain,
                prepared -> {
                  ran.set(true);
                  return null;
                }));
    assertFalse(ran.get(), "the plain helper's local work ran for a rolled-back message");

    // A check-back rolled the message back in the barrier first (its rollback marker), trustmsg
    // has not heard yet: the helper sends the rollback itself and runs no work.
    String checkedKey = Kit.unique("checked");
    Message checked = Message.builder(checkedKey, topic).key(checkedKey).payload("s11").build();
    trustmsg.prepare(checked);
    assertEquals(Decision.ROLLBACK, new Barrier(ds).check(p.bizId(), checkedKey));
    var marked =
        assertThrows(
            AlreadyRolledBackException.class,
            () ->
                template.execute(
                    checked,
                    conn -> {
                      ran.set(true);
                      return null;
                    }));
    assertFalse(ran.get(), "the local work ran despite the rollback marker");
    assertEquals("ROLLED_BACK", marked.view().orElseThrow().status(), "the rollback's answer");

    assertEquals("ROLLED_BACK", trustmsg.get(key).status());
    assertEquals("ROLLED_BACK", trustmsg.get(plainKey).status());
    assertEquals("ROLLED_BACK", trustmsg.get(checkedKey).status());
    assertTrue(
        recordsOf(trustmsg, topic, key, plainKey, checkedKey).isEmpty(),
        "a rolled-back message reached Kafka");
  }

  /** A check-back endpoint that answers from the barrier and counts its calls. */
  private static HttpServer countingCheckServer(AtomicInteger calls) throws Exception {
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        CheckBackHandler.DEFAULT_PATH,
        exchange -> {
          calls.incrementAndGet();
          exchange.sendResponseHeaders(500, -1);
          exchange.close();
        });
    server.start();
    return server;
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S12_a_retry_after_a_crash_after_the_local_commit_commits_at_once(Db db) throws Exception {
    DataSource ds = db.dataSource();
    AtomicInteger checkBacks = new AtomicInteger();
    HttpServer server = countingCheckServer(checkBacks);
    try {
      Kit.Producer p =
          Kit.register(
              Kit.unique("java-s12"),
              "http://127.0.0.1:" + server.getAddress().getPort() + CheckBackHandler.DEFAULT_PATH,
              60_000);
      TrustmsgClient trustmsg = client(p);
      var template = new TrustmsgTransactionTemplate(trustmsg, new Barrier(ds));
      String topic = Kit.unique("java.s12");
      String key = Kit.unique("order");
      Message order = Message.builder(key, topic).key(key).payload("s12").build();
      RuntimeException crash = new RuntimeException("the process dies here");

      var thrown =
          assertThrows(
              RuntimeException.class,
              () ->
                  template
                      .afterLocalCommit(
                          m -> {
                            throw crash;
                          })
                      .execute(
                          order,
                          conn -> {
                            insertOrder(conn, key, 12);
                            return key;
                          }));
      assertSame(crash, thrown);
      assertEquals(1, orders(ds, key));
      assertEquals("PREPARED", trustmsg.get(key).status(), "a decision was sent after the hook");

      AtomicBoolean ran = new AtomicBoolean();
      var again =
          assertThrows(
              AlreadyCommittedException.class,
              () ->
                  template.execute(
                      order,
                      conn -> {
                        ran.set(true);
                        insertOrder(conn, key, 12);
                        return key;
                      }));
      assertFalse(ran.get(), "the local work ran again");
      assertEquals("COMMITTED", again.view().orElseThrow().status());
      assertEquals("COMMITTED", trustmsg.get(key).status(), "not COMMITTED when the call returned");
      assertEquals(1, orders(ds, key));
      List<ConsumerRecord<byte[], byte[]>> records = recordsOf(trustmsg, topic, key);
      assertEquals(1, records.size(), "one record of the order");
      assertEquals(key, Topics.key(records.get(0)));
      assertEquals(0, checkBacks.get(), "trustmsg called check-back");
    } finally {
      server.stop(0);
    }
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S13_two_identical_requests_at_once_make_one_commit_and_one_message(Db db) throws Exception {
    DataSource ds = db.dataSource();
    Kit.Producer p = Kit.register(Kit.unique("java-s13"), "http://127.0.0.1:9/unused");
    TrustmsgClient trustmsg = client(p);
    var template = new TrustmsgTransactionTemplate(trustmsg, new Barrier(ds));
    String topic = Kit.unique("java.s13");
    String key = Kit.unique("order");
    Message order = Message.builder(key, topic).key(key).payload("s13").build();
    CyclicBarrier start = new CyclicBarrier(2);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    List<Future<String>> calls = new ArrayList<>();
    try {
      for (int i = 0; i < 2; i++) {
        calls.add(
            pool.submit(
                () -> {
                  start.await(10, TimeUnit.SECONDS);
                  try {
                    return template.execute(
                        order,
                        conn -> {
                          insertOrder(conn, key, 13);
                          Thread.sleep(300); // the other request meets this open transaction
                          return "placed";
                        });
                  } catch (AlreadyCommittedException e) {
                    return "already placed";
                  }
                }));
      }
      List<String> outcomes = new ArrayList<>();
      for (Future<String> f : calls) {
        outcomes.add(f.get(60, TimeUnit.SECONDS));
      }
      assertTrue(outcomes.contains("placed"), outcomes.toString());
    } finally {
      pool.shutdownNow();
    }
    assertEquals(1, orders(ds, key));
    assertEquals(1, markers(ds, p.bizId(), key, "commit"));
    assertEquals("COMMITTED", trustmsg.get(key).status());
    List<ConsumerRecord<byte[], byte[]>> records = recordsOf(trustmsg, topic, key);
    Set<String> ids =
        records.stream()
            .map(r -> Topics.header(r, "trustmsg-message-id"))
            .collect(Collectors.toSet());
    assertEquals(1, ids.size(), "message ids in Kafka: " + ids);
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S13_a_failing_and_a_succeeding_request_at_once_never_lose_the_order(Db db) throws Exception {
    DataSource ds = db.dataSource();
    Kit.Producer p = Kit.register(Kit.unique("java-s13b"), "http://127.0.0.1:9/unused");
    TrustmsgClient trustmsg = client(p);
    var template = new TrustmsgTransactionTemplate(trustmsg, new Barrier(ds));
    String topic = Kit.unique("java.s13");
    String key = Kit.unique("order");
    Message order = Message.builder(key, topic).key(key).payload("s13").build();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      // The failing one takes the marker first; the other waits on it, then runs its work while
      // the first sends its rollback: without the barrier's say, trustmsg would roll back an
      // order the second one commits locally.
      Future<String> failing =
          pool.submit(
              () -> {
                try {
                  return template.execute(
                      order,
                      conn -> {
                        insertOrder(conn, key, 13);
                        Thread.sleep(400);
                        throw new IllegalStateException("declined");
                      });
                } catch (IllegalStateException e) {
                  return "failed";
                } catch (AlreadyCommittedException e) {
                  return "already placed";
                }
              });
      Thread.sleep(150);
      Future<String> placing =
          pool.submit(
              () -> {
                try {
                  return template.execute(
                      order,
                      conn -> {
                        insertOrder(conn, key, 13);
                        Thread.sleep(300);
                        return "placed";
                      });
                } catch (AlreadyRolledBackException e) {
                  return "refused";
                }
              });
      String first = failing.get(60, TimeUnit.SECONDS);
      String second = placing.get(60, TimeUnit.SECONDS);
      long rows = orders(ds, key);
      String status = trustmsg.get(key).status();
      if (rows == 1) {
        assertEquals("placed", second, first);
        assertEquals("COMMITTED", status, "the order is stored, its message must be committed");
      } else {
        assertEquals("refused", second, first);
        assertEquals("ROLLED_BACK", status);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S14_a_prepare_answered_committed_runs_no_local_work(Db db) throws Exception {
    DataSource ds = db.dataSource();
    Kit.Producer p = Kit.register(Kit.unique("java-s14"), "http://127.0.0.1:9/unused");
    TrustmsgClient trustmsg = client(p);
    var template = new TrustmsgTransactionTemplate(trustmsg, new Barrier(ds));
    String topic = Kit.unique("java.s14");
    String key = Kit.unique("order");
    Message order = Message.builder(key, topic).key(key).payload("s14").build();
    template.execute(
        order,
        conn -> {
          insertOrder(conn, key, 14);
          return null;
        });
    String plainKey = Kit.unique("plain");
    Message plain = Message.builder(plainKey, topic).key(plainKey).payload("s14").build();
    Transactions.run(trustmsg, plain, prepared -> null);

    AtomicBoolean entered = new AtomicBoolean();
    var e =
        assertThrows(
            AlreadyCommittedException.class,
            () ->
                template.execute(
                    order,
                    conn -> {
                      entered.set(true);
                      return null;
                    }));
    assertEquals("COMMITTED", e.view().orElseThrow().status(), "prepare's answer");
    assertEquals("COMMITTED", e.messageStatus());
    var plainAgain =
        assertThrows(
            AlreadyCommittedException.class,
            () ->
                Transactions.run(
                    trustmsg,
                    plain,
                    prepared -> {
                      entered.set(true);
                      return null;
                    }));
    assertEquals("COMMITTED", plainAgain.view().orElseThrow().status());
    assertFalse(entered.get(), "the callback was entered");
    assertEquals(1, orders(ds, key));
    assertEquals(1, markers(ds, p.bizId(), key, "commit"));
    List<ConsumerRecord<byte[], byte[]>> records = recordsOf(trustmsg, topic, key, plainKey);
    assertEquals(2, records.size(), "one record per order, nothing new");
  }
}
