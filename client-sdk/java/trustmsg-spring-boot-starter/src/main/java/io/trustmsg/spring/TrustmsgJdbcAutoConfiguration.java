package io.trustmsg.spring;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import io.trustmsg.client.Barrier;
import io.trustmsg.client.LocalMessageTable;
import io.trustmsg.client.TransactionalProducer;
import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
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
 * The barrier, {@link TrustmsgTemplate}, the local message table ({@link TrustmsgOutbox}, {@link
 * TrustmsgPublisher}, {@link TrustmsgEventExternalizer}) and {@link TrustmsgInbox} on the
 * application's one DataSource.
 */
@AutoConfiguration(
    after = {
      TrustmsgAutoConfiguration.class,
      DataSourceAutoConfiguration.class,
      DataSourceTransactionManagerAutoConfiguration.class
    },
    afterName = "org.springframework.boot.autoconfigure.jackson.JacksonAutoConfiguration")
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

  /**
   * Objects as JSON messages in the caller's transaction, serialized by the application's {@code
   * ObjectMapper} bean (Spring Boot's, with its modules), or a plain one when there is none.
   */
  @Bean
  @ConditionalOnMissingBean
  TrustmsgPublisher trustmsgPublisher(TrustmsgOutbox outbox, ObjectProvider<ObjectMapper> mappers) {
    return new TrustmsgPublisher(
        outbox, mappers.getIfUnique(() -> JsonMapper.builder().findAndAddModules().build()));
  }

  /** Application events of {@link TrustmsgMessage} types, written to the outbox as published. */
  @Bean
  @ConditionalOnMissingBean
  TrustmsgEventExternalizer trustmsgEventExternalizer(
      TrustmsgPublisher publisher, org.springframework.core.env.Environment environment) {
    return new TrustmsgEventExternalizer(publisher, environment);
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
