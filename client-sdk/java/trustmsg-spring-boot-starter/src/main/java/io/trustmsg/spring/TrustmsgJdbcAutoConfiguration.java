package io.trustmsg.spring;

import io.trustmsg.client.Barrier;
import io.trustmsg.client.LocalMessageTable;
import io.trustmsg.client.TransactionalProducer;
import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnExpression;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration;
import org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * The barrier, {@link TrustmsgTemplate}, the local message table ({@link TrustmsgOutbox}) and
 * {@link TrustmsgInbox} on the application's one DataSource.
 */
@AutoConfiguration(
    after = {
      TrustmsgAutoConfiguration.class,
      DataSourceAutoConfiguration.class,
      DataSourceTransactionManagerAutoConfiguration.class
    })
@EnableConfigurationProperties(TrustmsgProperties.class)
@ConditionalOnClass(name = "org.springframework.jdbc.datasource.DataSourceUtils")
@ConditionalOnSingleCandidate(DataSource.class)
public class TrustmsgJdbcAutoConfiguration {
  @Bean
  @ConditionalOnMissingBean
  Barrier trustmsgBarrier(DataSource dataSource, TrustmsgProperties p) throws SQLException {
    if (p.isCreateTables()) {
      Barrier.createTables(dataSource);
    }
    return new Barrier(dataSource);
  }

  /** The local message table, {@code trustmsg_outbox} (made at start with create-tables). */
  @Bean
  @ConditionalOnMissingBean
  LocalMessageTable trustmsgLocalMessageTable(DataSource dataSource, TrustmsgProperties p)
      throws SQLException {
    if (p.isCreateTables()) {
      try (Connection c = dataSource.getConnection()) {
        c.setAutoCommit(true);
        LocalMessageTable.createTable(c);
      }
    }
    return new LocalMessageTable();
  }

  @Bean
  @ConditionalOnMissingBean
  TrustmsgOutbox trustmsgOutbox(DataSource dataSource, LocalMessageTable table) {
    return new TrustmsgOutbox(dataSource, table);
  }

  @Bean
  @ConditionalOnMissingBean
  @ConditionalOnBean({TransactionalProducer.class, PlatformTransactionManager.class})
  TrustmsgTemplate trustmsgTemplate(
      TransactionalProducer<?> producer,
      PlatformTransactionManager transactionManager,
      DataSource dataSource) {
    return new TrustmsgTemplate(producer, transactionManager, dataSource);
  }

  @Bean
  @ConditionalOnMissingBean
  @ConditionalOnClass(name = "org.apache.kafka.clients.consumer.ConsumerRecord")
  @ConditionalOnBean(PlatformTransactionManager.class)
  @ConditionalOnExpression("'${trustmsg.inbox.group:${spring.kafka.consumer.group-id:}}' != ''")
  TrustmsgInbox trustmsgInbox(
      PlatformTransactionManager transactionManager,
      DataSource dataSource,
      TrustmsgProperties p,
      @Value("${spring.kafka.consumer.group-id:}") String kafkaGroup) {
    String group = p.getInbox().getGroup() != null ? p.getInbox().getGroup() : kafkaGroup;
    return new TrustmsgInbox(transactionManager, dataSource, group);
  }
}
