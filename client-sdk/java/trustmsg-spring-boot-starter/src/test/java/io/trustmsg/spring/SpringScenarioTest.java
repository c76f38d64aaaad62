package io.trustmsg.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.trustmsg.client.AlreadyCommittedException;
import io.trustmsg.client.AlreadyRolledBackException;
import io.trustmsg.client.Barrier;
import io.trustmsg.client.Message;
import io.trustmsg.client.Processed;
import io.trustmsg.client.TrustmsgClient;
import io.trustmsg.testkit.Kit;
import io.trustmsg.testkit.Kit.Db;
import io.trustmsg.testkit.Topics;
import java.time.Duration;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;

/**
 * The starter's TrustmsgTemplate and TrustmsgInbox on Spring's own JDBC transaction manager,
 * against the kit's trustmsg, MariaDB, PostgreSQL and Kafka (S01, S02 and S07 the Spring way).
 */
class SpringScenarioTest {

  @BeforeAll
  static void kit() throws Exception {
    Kit.require();
    for (Db db : Db.values()) {
      Barrier.createTables(db.dataSource());
      Kit.execute(
          db.dataSource(), "CREATE TABLE IF NOT EXISTS spring_orders (id VARCHAR(64) PRIMARY KEY)");
    }
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S01_S02_the_template_commits_the_marker_with_the_jdbc_template_rows(Db db) throws Exception {
    DataSource ds = db.dataSource();
    Kit.Producer p = Kit.register(Kit.unique("java-spring"), "http://127.0.0.1:9/unused");
    TrustmsgClient client = TrustmsgClient.builder(Kit.url(), p.bizId(), p.token()).build();
    TrustmsgTemplate trustmsg = new TrustmsgTemplate(client, new JdbcTransactionManager(ds), ds);
    JdbcTemplate jdbc = new JdbcTemplate(ds);
    String topic = Kit.unique("java.spring");
    String ok = Kit.unique("ok");
    String bad = Kit.unique("bad");

    String done =
        trustmsg.execute(
            Message.builder(ok, topic).payload("spring").build(),
            status -> {
              jdbc.update("INSERT INTO spring_orders (id) VALUES (?)", ok);
              return ok;
            });
    IllegalStateException boom = new IllegalStateException("declined");
    assertThatThrownBy(
            () ->
                trustmsg.execute(
                    Message.builder(bad, topic).payload("never").build(),
                    status -> {
                      jdbc.update("INSERT INTO spring_orders (id) VALUES (?)", bad);
                      throw boom;
                    }))
        .isSameAs(boom);

    assertThat(done).isEqualTo(ok);
    // What the trustmsg.template.executions meter counts.
    assertThat(trustmsg.count(TrustmsgTemplate.Outcome.COMMITTED)).isEqualTo(1);
    assertThat(trustmsg.count(TrustmsgTemplate.Outcome.FAILED)).isEqualTo(1);
    assertThatThrownBy(
            () ->
                trustmsg.execute(
                    Message.builder(bad, topic).payload("never").build(), status -> "again"))
        .isInstanceOf(AlreadyRolledBackException.class);
    assertThat(trustmsg.count(TrustmsgTemplate.Outcome.ALREADY_ROLLED_BACK)).isEqualTo(1);
    assertThat(Kit.count(ds, "SELECT COUNT(*) FROM spring_orders WHERE id = ?", ok)).isEqualTo(1);
    assertThat(
            Kit.count(
                ds,
                "SELECT COUNT(*) FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ?",
                p.bizId(),
                ok))
        .isEqualTo(1);
    assertThat(Kit.count(ds, "SELECT COUNT(*) FROM spring_orders WHERE id = ?", bad)).isZero();
    assertThat(
            Kit.count(
                ds,
                "SELECT COUNT(*) FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ?"
                    + " AND op = 'commit'",
                p.bizId(),
                bad))
        .isZero();
    assertThat(client.get(ok).status()).isEqualTo("COMMITTED");
    assertThat(client.get(bad).status()).isEqualTo("ROLLED_BACK");
    var records = Topics.readUntil(topic, Duration.ofSeconds(45), r -> !r.isEmpty());
    assertThat(records).hasSize(1);
    assertThat(new String(records.get(0).value(), java.nio.charset.StandardCharsets.UTF_8))
        .isEqualTo("spring");
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S07_the_spring_inbox_processes_a_record_once(Db db) throws Exception {
    DataSource ds = db.dataSource();
    JdbcTemplate jdbc = new JdbcTemplate(ds);
    TrustmsgInbox inbox =
        new TrustmsgInbox(new JdbcTransactionManager(ds), ds, Kit.unique("java-spring-group"));
    long id = System.nanoTime() & Long.MAX_VALUE;
    RecordHeaders h = new RecordHeaders();
    h.add(
        "trustmsg-message-id", Long.toString(id).getBytes(java.nio.charset.StandardCharsets.UTF_8));
    var record =
        new ConsumerRecord<>(
            "t",
            0,
            0L,
            0L,
            TimestampType.CREATE_TIME,
            0,
            0,
            new byte[0],
            new byte[0],
            h,
            java.util.Optional.empty());
    String row = "inbox-" + id;

    Processed<String> first =
        inbox.process(
            record,
            status -> {
              jdbc.update("INSERT INTO spring_orders (id) VALUES (?)", row);
              return row;
            });
    Processed<String> again =
        inbox.process(
            record,
            status -> {
              jdbc.update("INSERT INTO spring_orders (id) VALUES (?)", row + "-again");
              return "again";
            });

    assertThat(first.value()).isEqualTo(row);
    assertThat(again.isRepeat()).isTrue();
    assertThat(Kit.count(ds, "SELECT COUNT(*) FROM spring_orders WHERE id LIKE ?", row + "%"))
        .isEqualTo(1);
    String failing = "inbox-failed-" + id;
    long other = id ^ 1;
    assertThatThrownBy(
            () ->
                inbox.process(
                    other,
                    status -> {
                      jdbc.update("INSERT INTO spring_orders (id) VALUES (?)", failing);
                      throw new IllegalStateException("work failed");
                    }))
        .hasMessage("work failed");
    assertThat(Kit.count(ds, "SELECT COUNT(*) FROM spring_orders WHERE id = ?", failing)).isZero();
    assertThat(inbox.process(other, status -> "later").isDone()).isTrue();
    var foreign = new ConsumerRecord<>("t", 0, 1L, new byte[0], new byte[0]);
    assertThatThrownBy(() -> inbox.process(foreign, status -> "never"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S11_S12_S14_the_spring_template_runs_no_work_for_a_decided_message(Db db) throws Exception {
    DataSource ds = db.dataSource();
    Kit.Producer p = Kit.register(Kit.unique("java-spring-retry"), "http://127.0.0.1:9/unused");
    TrustmsgClient client = TrustmsgClient.builder(Kit.url(), p.bizId(), p.token()).build();
    TrustmsgTemplate trustmsg = new TrustmsgTemplate(client, new JdbcTransactionManager(ds), ds);
    JdbcTemplate jdbc = new JdbcTemplate(ds);
    String topic = Kit.unique("java.spring");
    java.util.concurrent.atomic.AtomicInteger runs =
        new java.util.concurrent.atomic.AtomicInteger();

    // S12: the hook stops the call after the COMMIT; the retry sends the commit itself.
    String crashed = Kit.unique("crashed");
    Message m12 = Message.builder(crashed, topic).payload("s12").build();
    assertThatThrownBy(
            () ->
                trustmsg
                    .afterLocalCommit(
                        m -> {
                          throw new IllegalStateException("dies here");
                        })
                    .execute(
                        m12,
                        status -> {
                          runs.incrementAndGet();
                          return jdbc.update("INSERT INTO spring_orders (id) VALUES (?)", crashed);
                        }))
        .hasMessage("dies here");
    assertThat(client.get(crashed).status()).isEqualTo("PREPARED");
    assertThatThrownBy(() -> trustmsg.execute(m12, status -> runs.incrementAndGet()))
        .isInstanceOf(AlreadyCommittedException.class);
    assertThat(client.get(crashed).status()).isEqualTo("COMMITTED");

    // S14: a prepare answered COMMITTED.
    assertThatThrownBy(() -> trustmsg.execute(m12, status -> runs.incrementAndGet()))
        .isInstanceOf(AlreadyCommittedException.class);

    // S11: a retry after a rollback.
    String failed = Kit.unique("failed");
    Message m11 = Message.builder(failed, topic).payload("s11").build();
    assertThatThrownBy(
            () ->
                trustmsg.execute(
                    m11,
                    status -> {
                      throw new IllegalStateException("declined");
                    }))
        .hasMessage("declined");
    assertThatThrownBy(() -> trustmsg.execute(m11, status -> runs.incrementAndGet()))
        .isInstanceOf(AlreadyRolledBackException.class);

    // A callback that marks the transaction rollback-only: rolled back, and so is the message.
    String rollbackOnly = Kit.unique("rollback-only");
    assertThatThrownBy(
            () ->
                trustmsg.execute(
                    Message.builder(rollbackOnly, topic).payload("x").build(),
                    status -> {
                      jdbc.update("INSERT INTO spring_orders (id) VALUES (?)", rollbackOnly);
                      status.setRollbackOnly();
                      return "returned all the same";
                    }))
        .isInstanceOf(org.springframework.transaction.UnexpectedRollbackException.class);
    assertThat(Kit.count(ds, "SELECT COUNT(*) FROM spring_orders WHERE id = ?", rollbackOnly))
        .isZero();
    assertThat(client.get(rollbackOnly).status()).isEqualTo("ROLLED_BACK");

    // Inside an open transaction the template's would join it, and commit the message first.
    var outer =
        new org.springframework.transaction.support.TransactionTemplate(
            new JdbcTransactionManager(ds));
    String inside = Kit.unique("inside");
    assertThatThrownBy(
            () ->
                outer.executeWithoutResult(
                    s ->
                        trustmsg.execute(
                            Message.builder(inside, topic).payload("x").build(),
                            status -> runs.incrementAndGet())))
        .isInstanceOf(org.springframework.transaction.IllegalTransactionStateException.class);
    assertThatThrownBy(() -> client.get(inside))
        .isInstanceOf(io.trustmsg.client.NotFoundException.class);

    assertThat(runs.get()).as("local work runs: only the first attempt's").isEqualTo(1);
    assertThat(Kit.count(ds, "SELECT COUNT(*) FROM spring_orders WHERE id = ?", crashed))
        .isEqualTo(1);
  }
}
