package io.trustmsg.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.trustmsg.testkit.CheckServer;
import io.trustmsg.testkit.Kit;
import io.trustmsg.testkit.Kit.Db;
import io.trustmsg.testkit.Topics;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The contract kit's scenarios (client-sdk/conformance/scenarios.json) against the real trustmsg,
 * MariaDB, PostgreSQL and Kafka. S08 (the Kafka way in) is in trustmsg-kafka.
 */
class ScenarioTest {
  private static final Duration KAFKA_WAIT = Duration.ofSeconds(45);
  private static final HttpClient HTTP = HttpClient.newHttpClient();

  @BeforeAll
  static void kit() throws SQLException {
    Kit.require();
    for (Db db : Db.values()) {
      DataSource ds = db.dataSource();
      Barrier.createTables(ds);
      Barrier.createTables(ds); // idempotent
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

  private static long markers(DataSource ds, String bizId, String key) throws SQLException {
    return Kit.count(
        ds,
        "SELECT COUNT(*) FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ?",
        bizId,
        key);
  }

  private static MessageView until(
      TrustmsgClient c, String key, java.util.function.Predicate<MessageView> p) {
    return Kit.eventually(
        Duration.ofSeconds(40),
        key + " to reach its state",
        () -> {
          MessageView v = c.get(key);
          return p.test(v) ? v : null;
        });
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S01_a_committed_message_reaches_kafka_byte_for_byte(Db db) throws Exception {
    DataSource ds = db.dataSource();
    Kit.Producer p = Kit.register(Kit.unique("java-s01"), "http://127.0.0.1:9/unused");
    TrustmsgClient trustmsg = client(p);
    String topic = Kit.unique("java.s01");
    String key = Kit.unique("order");
    byte[] payload = {0, 1, 2, (byte) 0xff, '{', '}', (byte) 0xc3};
    Message message =
        Message.builder(key, topic)
            .payload(payload)
            .key("customer-7")
            .header("content-type", "application/octet-stream")
            .header("x-source", "java")
            .build();
    var template = new TrustmsgTransactionTemplate(trustmsg, new Barrier(ds));

    String id =
        template.execute(
            message,
            conn -> {
              insertOrder(conn, key, 42);
              return key;
            });

    assertEquals(key, id);
    assertEquals(1, orders(ds, key));
    assertEquals(1, markers(ds, p.bizId(), key));
    MessageView view = until(trustmsg, key, MessageView::isSent);
    assertEquals("COMMITTED", view.status());
    List<ConsumerRecord<byte[], byte[]>> records =
        Topics.readUntil(topic, KAFKA_WAIT, r -> !r.isEmpty());
    assertEquals(1, records.size(), "exactly one record");
    ConsumerRecord<byte[], byte[]> r = records.get(0);
    assertEquals("customer-7", Topics.key(r));
    assertArrayEquals(payload, r.value());
    assertEquals("application/octet-stream", Topics.header(r, "content-type"));
    assertEquals("java", Topics.header(r, "x-source"));
    assertEquals(Long.toString(view.id()), Topics.header(r, "trustmsg-message-id"));
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S02_a_failed_local_transaction_is_rolled_back_and_never_delivered(Db db) throws Exception {
    DataSource ds = db.dataSource();
    Kit.Producer p = Kit.register(Kit.unique("java-s02"), "http://127.0.0.1:9/unused");
    TrustmsgClient trustmsg = client(p);
    String topic = Kit.unique("java.s02");
    String key = Kit.unique("order");
    var template = new TrustmsgTransactionTemplate(trustmsg, new Barrier(ds));
    IllegalStateException boom = new IllegalStateException("out of stock");

    IllegalStateException thrown =
        assertThrows(
            IllegalStateException.class,
            () ->
                template.execute(
                    Message.builder(key, topic).payload("no").build(),
                    conn -> {
                      insertOrder(conn, key, 1);
                      throw boom;
                    }));

    assertSame(boom, thrown, "the work's own exception, not another");
    assertEquals(0, orders(ds, key));
    // No commit marker; the helper recorded the rollback in the barrier (as a check-back would)
    // before sending it, so that no request of the same key can commit after it.
    assertEquals(
        0,
        Kit.count(
            ds,
            "SELECT COUNT(*) FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ? AND op = 'commit'",
            p.bizId(),
            key));
    assertEquals("ROLLED_BACK", trustmsg.get(key).status());
    String later = Kit.unique("later");
    template.execute(Message.builder(later, topic).payload("yes").build(), conn -> null);
    List<ConsumerRecord<byte[], byte[]>> records =
        Topics.readUntil(
            topic,
            KAFKA_WAIT,
            rs ->
                rs.stream()
                    .anyMatch(r -> "yes".equals(new String(r.value(), StandardCharsets.UTF_8))));
    assertTrue(
        records.stream().noneMatch(r -> "no".equals(new String(r.value(), StandardCharsets.UTF_8))),
        "the rolled-back message reached Kafka");
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S03_a_producer_that_stops_before_commit_is_committed_by_check_back(Db db) throws Exception {
    DataSource ds = db.dataSource();
    try (CheckServer server = new CheckServer()) {
      Kit.Producer p = Kit.register(Kit.unique("java-s03"), server.url());
      Barrier barrier = new Barrier(ds);
      var seen = new java.util.concurrent.CopyOnWriteArrayList<CheckRequest>();
      server.serve(
          new CheckBackHandler(
              p.secret(),
              req -> {
                seen.add(req);
                return barrier.decide(req);
              }));
      TrustmsgClient trustmsg = client(p);
      String topic = Kit.unique("java.s03");
      String key = Kit.unique("order");
      MessageView prepared =
          trustmsg.prepare(Message.builder(key, topic).payload("crashed").build());
      barrier.runInTransaction(
          p.bizId(),
          key,
          conn -> {
            insertOrder(conn, key, 3);
            return null;
          });
      // The process "stops" here: no commit call.

      MessageView v = until(trustmsg, key, MessageView::isCommitted);
      assertEquals(prepared.id(), v.id());
      assertFalse(seen.isEmpty(), "the check-back reached the handler");
      assertEquals(key, seen.get(0).messageKey());
      var records = Topics.readUntil(topic, KAFKA_WAIT, r -> !r.isEmpty());
      assertEquals("crashed", new String(records.get(0).value(), StandardCharsets.UTF_8));
    }
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S04_a_check_back_during_the_local_transaction_waits_for_it(Db db) throws Exception {
    for (boolean commit : new boolean[] {true, false}) {
      DataSource ds = db.dataSource();
      String secret =
          "whsec_"
              + Base64.getEncoder()
                  .encodeToString(
                      "s04-test-key-32-bytes-long-xxxxx".getBytes(StandardCharsets.UTF_8));
      Barrier barrier = new Barrier(ds);
      try (CheckServer server = new CheckServer(new CheckBackHandler(secret, barrier))) {
        String bizId = Kit.unique("java-s04");
        String key = Kit.unique("order");
        CompletableFuture<HttpResponse<String>> answer;
        long committedAt;
        try (Connection c = ds.getConnection()) {
          c.setAutoCommit(false);
          Barrier.insert(c, bizId, key);
          insertOrder(c, key, 4);
          answer =
              HTTP.sendAsync(
                  signed(server.url(), secret, bizId, key, 77),
                  HttpResponse.BodyHandlers.ofString());
          Thread.sleep(1000);
          assertFalse(answer.isDone(), "answered while the local transaction was open");
          committedAt = System.nanoTime();
          if (commit) {
            c.commit();
          } else {
            c.rollback();
          }
        }
        HttpResponse<String> r = answer.get(30, TimeUnit.SECONDS);
        assertTrue(System.nanoTime() >= committedAt);
        assertEquals(200, r.statusCode(), r.body());
        JsonNode body = Kit.JSON.readTree(r.body());
        assertEquals(77, body.get("message_id").asLong());
        assertEquals(commit ? "commit" : "rollback", body.get("decision").asText());
        if (!commit) {
          try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            var e =
                assertThrows(AlreadyDecidedException.class, () -> Barrier.insert(c, bizId, key));
            assertEquals(Decision.ROLLBACK, e.decision());
            c.rollback();
          }
          assertEquals(0, orders(ds, key));
        } else {
          assertEquals(1, orders(ds, key));
        }
      }
    }
  }

  static HttpRequest signed(String url, String secret, String bizId, String key, long id) {
    String body =
        "{\"biz_id\":\""
            + bizId
            + "\",\"message_key\":\""
            + key
            + "\",\"message_id\":"
            + id
            + ",\"attempt\":1,\"prepared_at\":\"2026-01-01T00:00:00Z\"}";
    long now = System.currentTimeMillis() / 1000;
    String sig =
        new WebhookSigner(secret)
            .signWebhook("chk_" + id + "_1", now, body.getBytes(StandardCharsets.UTF_8));
    return HttpRequest.newBuilder(URI.create(url))
        .header("content-type", "application/json")
        .header("webhook-id", "chk_" + id + "_1")
        .header("webhook-timestamp", Long.toString(now))
        .header("webhook-signature", sig)
        .POST(HttpRequest.BodyPublishers.ofString(body))
        .build();
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S05_barrier_keys_differing_by_a_space_or_case_are_other_messages(Db db) throws Exception {
    DataSource ds = db.dataSource();
    Barrier barrier = new Barrier(ds);
    String bizId = Kit.unique("java-s05");
    for (JsonNode pair : Kit.vectors("barrier-keys.json").get("pairs")) {
      String a = pair.get("a").asText();
      String b = pair.get("b").asText();
      barrier.runInTransaction(bizId, a, conn -> null);
      assertEquals(Decision.ROLLBACK, barrier.check(bizId, b), pair.get("name").asText());
      assertEquals(Decision.COMMIT, barrier.check(bizId, a), pair.get("name").asText());
    }
  }

  @Test
  void S06_a_forged_or_stale_check_back_is_refused() throws Exception {
    DataSource ds = Db.MYSQL.dataSource();
    Barrier barrier = new Barrier(ds);
    String secret =
        "whsec_"
            + Base64.getEncoder()
                .encodeToString(
                    "s06-right-key-32-bytes-long-xxxx".getBytes(StandardCharsets.UTF_8));
    String other =
        "whsec_"
            + Base64.getEncoder()
                .encodeToString(
                    "s06-other-key-32-bytes-long-xxxx".getBytes(StandardCharsets.UTF_8));
    try (CheckServer server = new CheckServer(new CheckBackHandler(secret, barrier))) {
      String bizId = Kit.unique("java-s06");
      String key = Kit.unique("order");
      long now = System.currentTimeMillis() / 1000;
      String body =
          "{\"biz_id\":\""
              + bizId
              + "\",\"message_key\":\""
              + key
              + "\",\"message_id\":6,\"attempt\":1,\"prepared_at\":\"2026-01-01T00:00:00Z\"}";
      byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
      WebhookSigner right = new WebhookSigner(secret);
      Map<String, Map<String, String>> forged =
          Map.of(
              "another secret",
                  Map.of(
                      "webhook-id",
                      "chk_6_1",
                      "webhook-timestamp",
                      Long.toString(now),
                      "webhook-signature",
                      new WebhookSigner(other).signWebhook("chk_6_1", now, bytes)),
              "10 minutes old",
                  Map.of(
                      "webhook-id",
                      "chk_6_1",
                      "webhook-timestamp",
                      Long.toString(now - 600),
                      "webhook-signature",
                      right.signWebhook("chk_6_1", now - 600, bytes)),
              "no signature headers", Map.of());
      for (var c : forged.entrySet()) {
        var rb =
            HttpRequest.newBuilder(URI.create(server.url()))
                .POST(HttpRequest.BodyPublishers.ofString(body));
        c.getValue().forEach(rb::header);
        assertEquals(
            401,
            HTTP.send(rb.build(), HttpResponse.BodyHandlers.ofString()).statusCode(),
            c.getKey());
      }
      String tampered = body.replace("\"message_id\":6", "\"message_id\":7");
      var rb =
          HttpRequest.newBuilder(URI.create(server.url()))
              .header("webhook-id", "chk_6_1")
              .header("webhook-timestamp", Long.toString(now))
              .header("webhook-signature", right.signWebhook("chk_6_1", now, bytes))
              .POST(HttpRequest.BodyPublishers.ofString(tampered));
      assertEquals(
          401,
          HTTP.send(rb.build(), HttpResponse.BodyHandlers.ofString()).statusCode(),
          "tampered body");
      assertEquals(0, markers(ds, bizId, key), "a forged call wrote a marker");

      HttpResponse<String> ok =
          HTTP.send(
              signed(server.url(), secret, bizId, key, 6), HttpResponse.BodyHandlers.ofString());
      assertEquals(200, ok.statusCode());
      assertEquals("rollback", Kit.JSON.readTree(ok.body()).get("decision").asText());
      assertEquals(1, markers(ds, bizId, key));
    }
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S07_the_inbox_drops_a_redelivered_record_and_keeps_the_work_atomic(Db db) throws Exception {
    DataSource ds = db.dataSource();
    Kit.Producer p = Kit.register(Kit.unique("java-s07"), "http://127.0.0.1:9/unused");
    TrustmsgClient trustmsg = client(p);
    String topic = Kit.unique("java.s07");
    String key = Kit.unique("order");
    String failing = Kit.unique("order");
    Transactions.run(trustmsg, Message.builder(key, topic).payload("a").build(), prepared -> null);
    Transactions.run(
        trustmsg, Message.builder(failing, topic).payload("b").build(), prepared -> null);
    var records = Topics.readUntil(topic, KAFKA_WAIT, r -> r.size() >= 2);
    Inbox inbox = new Inbox(ds, Kit.unique("java-group"));

    for (int delivery = 1; delivery <= 2; delivery++) {
      ConsumerRecord<byte[], byte[]> r = records.get(0);
      long id =
          Inbox.parseMessageId(r.headers().lastHeader(Inbox.MESSAGE_ID_HEADER).value())
              .orElseThrow();
      String orderId =
          Topics.key(r) + "-" + new String(r.value(), StandardCharsets.UTF_8) + "-" + id;
      Processed<String> done =
          inbox.process(
              id,
              conn -> {
                insertOrder(conn, orderId, 7);
                return orderId;
              });
      assertEquals(delivery == 2, done.isRepeat(), "delivery " + delivery);
      assertEquals(1, orders(ds, orderId));
    }
    ConsumerRecord<byte[], byte[]> third = records.get(1);
    long id =
        Inbox.parseMessageId(third.headers().lastHeader(Inbox.MESSAGE_ID_HEADER).value())
            .orElseThrow();
    String orderId = "s07-failed-" + id;
    assertThrows(
        IllegalStateException.class,
        () ->
            inbox.process(
                id,
                conn -> {
                  insertOrder(conn, orderId, 8);
                  throw new IllegalStateException("work failed");
                }));
    assertEquals(0, orders(ds, orderId));
    assertEquals(
        1,
        Kit.count(
            ds,
            "SELECT COUNT(*) FROM trustmsg_inbox WHERE consumer_group = ?",
            inbox.consumerGroup()),
        "only the first record's inbox row");
    assertTrue(
        inbox.process(id, conn -> "again").isDone(), "the failed record is processed again later");
    for (JsonNode c : Kit.vectors("record-headers.json").get("cases")) {
      if (c.get("message_id").isNull()) {
        JsonNode h = c.get("headers").get(0);
        boolean isId = h.get(0).asText().equals(Inbox.MESSAGE_ID_HEADER);
        assertTrue(
            !isId || Inbox.parseMessageId(h.get(1).isNull() ? null : h.get(1).asText()).isEmpty(),
            c.get("name").asText());
      }
    }
  }

  @Test
  void S09_the_local_message_table_delivers() throws Exception {
    DataSource ds = Db.MYSQL.dataSource();
    String topic = Kit.env("TRUSTMSG_KIT_OUTBOX_TOPIC_PREFIX") + Kit.unique("java");
    String committed = Kit.unique("java-s09");
    String rolledBack = Kit.unique("java-s09-rb");
    byte[] payload = {'o', 0, (byte) 0x80, 'k'};
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      LocalMessageTable.enqueue(
          c,
          Message.builder(committed, topic)
              .payload(payload)
              .key("r-1")
              .header("x-from", "java")
              .build());
      c.commit();
      LocalMessageTable.enqueue(c, Message.builder(rolledBack, topic).payload("never").build());
      c.rollback();
    }
    var records = Topics.readUntil(topic, KAFKA_WAIT, r -> !r.isEmpty());
    assertArrayEquals(payload, records.get(0).value());
    assertEquals("r-1", Topics.key(records.get(0)));
    assertEquals("java", Topics.header(records.get(0), "x-from"));
    Kit.eventually(
        Duration.ofSeconds(30),
        "the row marked relayed (2)",
        () ->
            Kit.count(
                        ds,
                        "SELECT COUNT(*) FROM trustmsg_outbox WHERE message_key = ? AND status = 2",
                        committed)
                    == 1
                ? true
                : null);
    assertEquals(
        0, Kit.count(ds, "SELECT COUNT(*) FROM trustmsg_outbox WHERE message_key = ?", rolledBack));
    assertEquals(1, records.size());
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S09_outbox_rows_vectors_write_that_row(Db db) throws Exception {
    DataSource ds = db.dataSource();
    String table = "java_outbox_vectors";
    try (Connection c = ds.getConnection()) {
      Dialect dialect = Dialect.of(c);
      dialect.runScript(c, dialect.outboxSql().replace("trustmsg_outbox", table));
    }
    var writer = new LocalMessageTable(table, java.time.Clock.systemUTC());
    for (JsonNode v : Kit.vectors("outbox-rows.json").get("valid")) {
      JsonNode msg =
          ((com.fasterxml.jackson.databind.node.ObjectNode) v.get("message").deepCopy())
              .put("message_key", Kit.unique("vec"));
      Message m = OutboxVectors.message(msg);
      long id;
      try (Connection c = ds.getConnection()) {
        id = writer.insert(c, m);
      }
      JsonNode row = v.get("row");
      String name = v.get("name").asText();
      try (Connection c = ds.getConnection();
          PreparedStatement st =
              c.prepareStatement(
                  "SELECT message_key, topic, record_key, payload, headers, traceparent, deliver_at, status, "
                      + (db == Db.MYSQL
                          ? "TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), deliver_at) / 1000"
                          : "EXTRACT(EPOCH FROM (deliver_at - now())) * 1000")
                      + " FROM "
                      + table
                      + " WHERE id = ?")) {
        st.setLong(1, id);
        try (var rs = st.executeQuery()) {
          assertTrue(rs.next(), name);
          assertEquals(msg.get("message_key").asText(), rs.getString(1), name);
          assertEquals(row.get("topic").asText(), rs.getString(2), name);
          assertEquals(
              row.get("record_key").isNull() ? null : row.get("record_key").asText(),
              rs.getString(3),
              name);
          assertArrayEquals(
              Base64.getDecoder().decode(row.get("payload_base64").asText()), rs.getBytes(4), name);
          if (row.get("headers").isNull()) {
            assertNull(rs.getString(5), name);
          } else {
            assertEquals(row.get("headers"), Kit.JSON.readTree(rs.getString(5)), name);
          }
          assertEquals(
              row.get("traceparent").isNull() ? null : row.get("traceparent").asText(),
              rs.getString(6),
              name);
          if (row.get("deliver").isNull()) {
            assertNull(rs.getObject(7), name);
          } else {
            double ahead = rs.getDouble(9);
            double want = row.get("deliver").get("after_ms").asDouble();
            assertTrue(
                ahead > want - 10_000 && ahead <= want,
                name + ": deliver_at is " + ahead + " ms ahead");
          }
          assertEquals(0, rs.getInt(8), name);
        }
      }
    }
    for (JsonNode v : Kit.vectors("outbox-rows.json").get("invalid")) {
      try (Connection c = ds.getConnection()) {
        var e =
            assertThrows(
                InvalidRequestException.class,
                () -> writer.insert(c, OutboxVectors.message(v.get("message"))),
                v.get("name").asText());
        assertEquals(v.get("error").asText(), e.code().orElseThrow());
      }
    }
  }

  @Test
  void S10_a_503_is_retried_with_backoff_and_a_409_is_not() throws Exception {
    Kit.Producer p = Kit.register(Kit.unique("java-s10"), "http://127.0.0.1:9/unused");
    // A first wait of 300 ms, then 600 (each less up to a quarter, as jitter): each gap is at
    // least its wait, not gap against gap, as a request held up on a loaded machine makes one
    // gap longer than the next.
    TrustmsgClient trustmsg =
        TrustmsgClient.builder(Kit.proxyUrl(), p.bizId(), p.token())
            .retry(new RetryPolicy(5, Duration.ofMillis(300), Duration.ofSeconds(5)))
            .build();
    String topic = Kit.unique("java.s10");
    String key = Kit.unique("s10-key");
    trustmsg.prepare(Message.builder(key, topic).payload("one").build());
    Kit.fault(key, 503, 2);
    MessageView v = trustmsg.commitAsync(key).get(30, TimeUnit.SECONDS);
    assertEquals("COMMITTED", v.status());
    List<JsonNode> commits =
        Kit.requests(key).stream().filter(r -> r.get("path").asText().endsWith("/commit")).toList();
    assertEquals(3, commits.size(), commits.toString());
    assertEquals(
        List.of(503, 503, 200), commits.stream().map(r -> r.get("status").asInt()).toList());
    long gap1 = commits.get(1).get("at_ms").asLong() - commits.get(0).get("at_ms").asLong();
    long gap2 = commits.get(2).get("at_ms").asLong() - commits.get(1).get("at_ms").asLong();
    assertTrue(
        gap1 >= 220 && gap2 >= 440, "gaps " + gap1 + " then " + gap2 + " ms: not 300 then 600");

    String conflict = Kit.unique("s10-conflict");
    trustmsg.prepare(Message.builder(conflict, topic).payload("first").build());
    int before = Kit.requests(conflict).size();
    var e =
        assertThrows(
            ConflictException.class,
            () -> trustmsg.prepare(Message.builder(conflict, topic).payload("second").build()));
    assertEquals("prepare_conflict", e.code().orElseThrow());
    assertEquals(409, e.status().getAsInt());
    assertEquals(before + 1, Kit.requests(conflict).size(), "a 409 was retried");
  }
}
