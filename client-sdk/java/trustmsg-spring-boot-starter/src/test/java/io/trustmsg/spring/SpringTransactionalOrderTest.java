package io.trustmsg.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.trustmsg.client.LocalMessageTable;
import io.trustmsg.testkit.DevServer;
import io.trustmsg.testkit.Kit;
import io.trustmsg.testkit.Kit.Db;
import io.trustmsg.testkit.Topics;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.Status;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.jackson.JacksonAutoConfiguration;
import org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration;
import org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.autoconfigure.transaction.TransactionAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationEventPublisher;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.IllegalTransactionStateException;
import org.springframework.transaction.annotation.Transactional;

/**
 * S09 the Spring way: a real Spring Boot context (the starter's auto-configuration, Spring's JDBC
 * transaction manager, Boot's ObjectMapper) whose {@code @Transactional} order method writes its
 * order row and publishes its message, as a {@code @TrustmsgMessage} application event and through
 * {@link TrustmsgPublisher}, in the method's own transaction; trustmsg's relay ({@code
 * --outbox-source}) delivers what committed to Kafka as the application's JSON, and nothing of what
 * rolled back. MariaDB: the kit's relayed producer database; PostgreSQL: a {@code trustmsg dev} of
 * the test's own relaying the kit's PostgreSQL database. The Micrometer meters and the health
 * indicator are read from the same context.
 */
class SpringTransactionalOrderTest {

  /** The event: its topic from the application's properties, its keys from the event. */
  @TrustmsgMessage(
      topic = "${orders.topic}",
      messageKey = "'order-placed-' + orderId()",
      key = "orderId()")
  public record OrderPlaced(String orderId, String customer, long amountCents) {}

  /** What the shipping step publishes through the publisher bean. */
  public record OrderShipped(String orderId, java.time.Instant at) {}

  /** A newcomer's order service: JdbcTemplate rows and messages in one @Transactional method. */
  public static class OrderService {
    private final JdbcTemplate jdbc;
    private final ApplicationEventPublisher events;
    private final TrustmsgPublisher publisher;
    private final String topic;

    OrderService(
        JdbcTemplate jdbc,
        ApplicationEventPublisher events,
        TrustmsgPublisher publisher,
        String t) {
      this.jdbc = jdbc;
      this.events = events;
      this.publisher = publisher;
      this.topic = t;
    }

    @Transactional
    public void place(String orderId, String customer, long cents, boolean fail) {
      jdbc.update(
          "INSERT INTO s09_spring_orders (id, customer, cents) VALUES (?, ?, ?)",
          orderId,
          customer,
          cents);
      events.publishEvent(new OrderPlaced(orderId, customer, cents));
      publisher.publish(
          "order-shipped-" + orderId,
          topic,
          orderId,
          new OrderShipped(orderId, java.time.Instant.parse("2026-11-29T12:00:00Z")));
      if (fail) {
        throw new IllegalStateException("payment declined");
      }
    }
  }

  @Configuration
  static class App {
    @Bean
    OrderService orderService(
        DataSource ds,
        ApplicationEventPublisher events,
        TrustmsgPublisher publisher,
        org.springframework.core.env.Environment env) {
      return new OrderService(
          new JdbcTemplate(ds), events, publisher, env.getRequiredProperty("orders.topic"));
    }
  }

  @BeforeAll
  static void kit() throws Exception {
    Kit.require();
    for (Db db : Db.values()) {
      Kit.execute(
          db.dataSource(),
          "CREATE TABLE IF NOT EXISTS s09_spring_orders "
              + "(id VARCHAR(64) PRIMARY KEY, customer VARCHAR(64), cents BIGINT)");
      try (Connection c = db.dataSource().getConnection()) {
        LocalMessageTable.createTable(c); // the relay of PostgreSQL's starts on an existing table
      }
    }
  }

  @ParameterizedTest
  @EnumSource(Db.class)
  void S09_a_spring_transactional_order_publishes_through_the_outbox(Db db) throws Exception {
    if (db == Db.MYSQL) {
      run(
          db,
          Kit.env("TRUSTMSG_KIT_OUTBOX_TOPIC_PREFIX") + Kit.unique("java-spring"),
          Kit.kafka(),
          Kit.url());
      return;
    }
    // The kit relays only its MariaDB database; a dev instance of our own relays PostgreSQL's.
    String bizId = Kit.unique("java-s09-pg");
    try (DevServer dev =
        DevServer.start("--outbox-source", bizId + "=" + Kit.env("TRUSTMSG_KIT_POSTGRES_URL"))) {
      dev.register(bizId, "java.s09.*");
      try {
        run(db, "java.s09." + Kit.unique("orders"), dev.brokers(), dev.url());
      } catch (AssertionError e) {
        throw new AssertionError(e.getMessage() + "\ntrustmsg dev's log:\n" + dev.log(), e);
      }
    }
  }

  private void run(Db db, String topic, String brokers, String trustmsgUrl) throws Exception {
    String kitUrl =
        Kit.env(db == Db.MYSQL ? "TRUSTMSG_KIT_MYSQL_URL" : "TRUSTMSG_KIT_POSTGRES_URL");
    String[] creds = Kit.credentials(kitUrl);
    String ok = Kit.unique("O");
    String declined = Kit.unique("D");
    new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                DataSourceAutoConfiguration.class,
                DataSourceTransactionManagerAutoConfiguration.class,
                TransactionAutoConfiguration.class,
                JacksonAutoConfiguration.class,
                TrustmsgAutoConfiguration.class,
                TrustmsgJdbcAutoConfiguration.class,
                TrustmsgObservabilityAutoConfiguration.class))
        .withUserConfiguration(App.class)
        .withPropertyValues(
            "spring.datasource.url=" + Kit.jdbcUrl(kitUrl),
            "spring.datasource.username=" + creds[0],
            "spring.datasource.password=" + (creds[1] == null ? "" : creds[1]),
            // Boot's ObjectMapper as the application configures it: the payloads must follow it.
            "spring.jackson.property-naming-strategy=SNAKE_CASE",
            "trustmsg.url=" + trustmsgUrl,
            "trustmsg.biz-id=unused-here",
            "trustmsg.token=unused-here",
            "trustmsg.create-tables=true",
            "orders.topic=" + topic)
        .run(
            ctx -> {
              assertThat(ctx).hasNotFailed();
              OrderService orders = ctx.getBean(OrderService.class);
              TrustmsgOutbox outbox = ctx.getBean(TrustmsgOutbox.class);
              long before = outbox.enqueuedCount();

              orders.place(ok, "alice", 1250, false);
              assertThatThrownBy(() -> orders.place(declined, "bob", 990, true))
                  .hasMessage("payment declined");
              assertThatThrownBy(() -> ctx.publishEvent(new OrderPlaced("loose", "x", 1)))
                  .isInstanceOf(IllegalTransactionStateException.class);

              DataSource ds = ctx.getBean(DataSource.class);
              String row = "SELECT COUNT(*) FROM trustmsg_outbox WHERE message_key = ?";
              assertThat(Kit.count(ds, row, "order-placed-" + ok)).isEqualTo(1);
              assertThat(Kit.count(ds, row, "order-shipped-" + ok)).isEqualTo(1);
              assertThat(Kit.count(ds, row, "order-placed-" + declined)).isZero();
              assertThat(Kit.count(ds, row, "order-shipped-" + declined)).isZero();
              assertThat(Kit.count(ds, row, "order-placed-loose")).isZero();
              assertThat(
                      Kit.count(
                          ds, "SELECT COUNT(*) FROM s09_spring_orders WHERE id = ?", declined))
                  .isZero();

              List<ConsumerRecord<byte[], byte[]>> records =
                  Topics.readUntil(brokers, topic, Duration.ofSeconds(45), r -> r.size() >= 2);
              ObjectMapper json = new ObjectMapper();
              JsonNode placed = null;
              JsonNode shipped = null;
              for (ConsumerRecord<byte[], byte[]> r : records) {
                assertThat(Topics.key(r)).isEqualTo(ok);
                assertThat(Topics.header(r, "content-type")).isEqualTo("application/json");
                JsonNode v = json.readTree(new String(r.value(), StandardCharsets.UTF_8));
                if (v.has("customer")) {
                  placed = v;
                } else {
                  shipped = v;
                }
              }
              assertThat(placed).isNotNull();
              assertThat(placed.get("order_id").asText()).isEqualTo(ok);
              assertThat(placed.get("amount_cents").asLong()).isEqualTo(1250);
              assertThat(shipped).isNotNull();
              assertThat(shipped.get("at").asText()).isEqualTo("2026-11-29T12:00:00Z");
              Kit.eventually(
                  Duration.ofSeconds(30),
                  "both rows of " + ok + " marked relayed (2)",
                  () ->
                      Kit.count(
                                  ds,
                                  "SELECT COUNT(*) FROM trustmsg_outbox WHERE status = 2"
                                      + " AND message_key IN (?, ?)",
                                  "order-placed-" + ok,
                                  "order-shipped-" + ok)
                              == 2
                          ? true
                          : null);
              // The declined order's rows never existed, so only the placed order's two arrive.
              assertThat(records).hasSize(2);

              // The meters and the health component of the same context.
              SimpleMeterRegistry meters = new SimpleMeterRegistry();
              ctx.getBean(TrustmsgMetrics.class).bindTo(meters);
              assertThat(meters.get("trustmsg.outbox.enqueued").functionCounter().count())
                  .isEqualTo(before + 4.0); // two committed, two rolled back with the order
              assertThat(meters.get("trustmsg.outbox.pending").gauge().value()).isNotNaN();
              Health health = ctx.getBean(TrustmsgHealthIndicator.class).health();
              assertThat(health.getStatus()).isEqualTo(Status.UP);
              assertThat(health.getDetails()).containsKey("outbox.pending");
            });
  }
}
