package io.trustmsg.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.trustmsg.client.LocalMessageTable;
import io.trustmsg.client.Message;
import io.trustmsg.testkit.Kit;
import java.net.URI;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration;
import org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.autoconfigure.transaction.TransactionAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.IllegalTransactionStateException;
import org.springframework.transaction.annotation.Transactional;

/**
 * The starter's local message table on real MariaDB: {@code trustmsg.create-tables} makes {@code
 * trustmsg_outbox} in a database that has none, and {@link TrustmsgOutbox#enqueue} in a
 * {@code @Transactional} method commits and rolls back with the method's JdbcTemplate rows.
 */
class SpringOutboxTest {

  /** What an application writes: a business row and its message, in one @Transactional method. */
  static class Shipping {
    private final JdbcTemplate jdbc;
    private final TrustmsgOutbox outbox;

    Shipping(JdbcTemplate jdbc, TrustmsgOutbox outbox) {
      this.jdbc = jdbc;
      this.outbox = outbox;
    }

    @Transactional
    public void ship(String orderId, boolean fail) {
      jdbc.update("INSERT INTO shipments (order_id) VALUES (?)", orderId);
      outbox.enqueue(
          Message.builder("shipped-" + orderId, "orders.shipped").payload(orderId).build());
      if (fail) {
        throw new IllegalStateException("the carrier refused");
      }
    }
  }

  @Configuration
  static class App {
    @Bean
    Shipping shipping(DataSource ds, TrustmsgOutbox outbox) {
      return new Shipping(new JdbcTemplate(ds), outbox);
    }
  }

  @Test
  void createTablesMakesTheOutboxAndEnqueueJoinsTheTransaction() throws Exception {
    Kit.require();
    String kitUrl = Kit.env("TRUSTMSG_KIT_MYSQL_URL");
    String db = Kit.unique("java_starter").replace('-', '_');
    DataSource server = Kit.dataSource(kitUrl);
    Kit.execute(server, "CREATE DATABASE " + db);
    try {
      URI u = URI.create(kitUrl);
      String[] creds = Kit.credentials(kitUrl);
      String jdbcUrl = "jdbc:mariadb://" + u.getHost() + ":" + u.getPort() + "/" + db;
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  DataSourceAutoConfiguration.class,
                  DataSourceTransactionManagerAutoConfiguration.class,
                  TransactionAutoConfiguration.class,
                  TrustmsgAutoConfiguration.class,
                  TrustmsgJdbcAutoConfiguration.class))
          .withUserConfiguration(App.class)
          .withPropertyValues(
              "spring.datasource.url=" + jdbcUrl,
              "spring.datasource.username=" + creds[0],
              "spring.datasource.password=" + creds[1],
              "trustmsg.create-tables=true")
          .run(
              ctx -> {
                assertThat(ctx).hasNotFailed();
                assertThat(ctx).hasSingleBean(LocalMessageTable.class);
                assertThat(ctx).hasSingleBean(TrustmsgOutbox.class);
                DataSource ds = ctx.getBean(DataSource.class);
                for (String table :
                    new String[] {"trustmsg_barrier", "trustmsg_inbox", "trustmsg_outbox"}) {
                  assertThat(
                          Kit.count(
                              ds,
                              "SELECT COUNT(*) FROM information_schema.tables "
                                  + "WHERE table_schema = ? AND table_name = ?",
                              db,
                              table))
                      .as(table)
                      .isEqualTo(1);
                }
                Kit.execute(ds, "CREATE TABLE shipments (order_id VARCHAR(64) PRIMARY KEY)");
                Shipping shipping = ctx.getBean(Shipping.class);

                shipping.ship("A-1", false);
                assertThatThrownBy(() -> shipping.ship("A-2", true))
                    .hasMessage("the carrier refused");
                assertThatThrownBy(
                        () ->
                            ctx.getBean(TrustmsgOutbox.class)
                                .enqueue(Message.builder("loose", "orders").payload("x").build()))
                    .isInstanceOf(IllegalTransactionStateException.class);

                String count = "SELECT COUNT(*) FROM trustmsg_outbox WHERE message_key = ?";
                assertThat(Kit.count(ds, count, "shipped-A-1")).isEqualTo(1);
                assertThat(Kit.count(ds, "SELECT COUNT(*) FROM shipments WHERE order_id = 'A-1'"))
                    .isEqualTo(1);
                assertThat(Kit.count(ds, count, "shipped-A-2")).isZero();
                assertThat(Kit.count(ds, "SELECT COUNT(*) FROM shipments WHERE order_id = 'A-2'"))
                    .isZero();
                assertThat(Kit.count(ds, count, "loose")).isZero();
              });
    } finally {
      Kit.execute(server, "DROP DATABASE " + db);
    }
  }
}
