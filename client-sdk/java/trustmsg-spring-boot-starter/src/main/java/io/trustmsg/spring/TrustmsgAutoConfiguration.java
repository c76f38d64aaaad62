package io.trustmsg.spring;

import io.trustmsg.client.Barrier;
import io.trustmsg.client.CheckBackDecider;
import io.trustmsg.client.CheckBackHandler;
import io.trustmsg.client.CheckBackVerifier;
import io.trustmsg.client.RetryPolicy;
import io.trustmsg.client.TransactionalProducer;
import io.trustmsg.client.TrustmsgClient;
import java.sql.SQLException;
import java.time.Clock;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration;
import org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * trustmsg for Spring Boot, from {@code trustmsg.*}: the {@link TrustmsgClient} (when {@code
 * trustmsg.url} is set), the {@link Barrier} and {@link TrustmsgTemplate} on the application's
 * DataSource and transaction manager, the check-back endpoint (Spring MVC, when {@code
 * trustmsg.signing-secret} is set) and the {@link TrustmsgInbox} (kafka-clients present). Every
 * bean backs off when the application defines its own.
 */
@AutoConfiguration(after = {DataSourceAutoConfiguration.class, DataSourceTransactionManagerAutoConfiguration.class})
@EnableConfigurationProperties(TrustmsgProperties.class)
public class TrustmsgAutoConfiguration {

  @Bean
  @ConditionalOnMissingBean(TrustmsgClient.class)
  @ConditionalOnProperty(prefix = "trustmsg", name = "url")
  public TrustmsgClient trustmsgClient(TrustmsgProperties p) {
    if (p.getBizId() == null || p.getToken() == null) {
      throw new IllegalStateException("trustmsg.url is set: set trustmsg.biz-id and trustmsg.token too (the producer's registration)");
    }
    TrustmsgProperties.Retry r = p.getRetry();
    return TrustmsgClient.builder(p.getUrl(), p.getBizId(), p.getToken())
        .retry(new RetryPolicy(r.getMaxRetries(), r.getMinDelay(), r.getMaxDelay()))
        .build();
  }

  /** The barrier and the template, on the application's one DataSource. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.jdbc.datasource.DataSourceUtils")
  @ConditionalOnSingleCandidate(DataSource.class)
  static class Jdbc {
    @Bean
    @ConditionalOnMissingBean
    Barrier trustmsgBarrier(DataSource dataSource, TrustmsgProperties p) throws SQLException {
      if (p.isCreateTables()) {
        Barrier.createTables(dataSource);
      }
      return new Barrier(dataSource);
    }

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnBean({TransactionalProducer.class, PlatformTransactionManager.class})
    TrustmsgTemplate trustmsgTemplate(
        TransactionalProducer<?> producer, PlatformTransactionManager transactionManager, DataSource dataSource) {
      return new TrustmsgTemplate(producer, transactionManager, dataSource);
    }

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnClass(name = "org.apache.kafka.clients.consumer.ConsumerRecord")
    @ConditionalOnBean(PlatformTransactionManager.class)
    TrustmsgInbox trustmsgInbox(
        PlatformTransactionManager transactionManager,
        DataSource dataSource,
        TrustmsgProperties p,
        @Value("${spring.kafka.consumer.group-id:}") String kafkaGroup) {
      String group = p.getInbox().getGroup() != null ? p.getInbox().getGroup() : kafkaGroup;
      return new TrustmsgInbox(transactionManager, dataSource, group.isEmpty() ? "default" : group);
    }
  }

  /** The check-back endpoint of a Spring MVC application. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
  @ConditionalOnClass(name = "org.springframework.web.servlet.DispatcherServlet")
  @ConditionalOnProperty(prefix = "trustmsg", name = "signing-secret")
  @ConditionalOnProperty(prefix = "trustmsg.check", name = "enabled", matchIfMissing = true)
  static class CheckBack {
    @Bean
    @ConditionalOnMissingBean
    CheckBackHandler trustmsgCheckBackHandler(
        TrustmsgProperties p, ObjectProvider<CheckBackDecider> deciders) {
      CheckBackDecider decider =
          deciders.orderedStream()
              .filter(d -> !(d instanceof Barrier))
              .findFirst()
              .or(() -> deciders.orderedStream().findFirst())
              .orElseThrow(() -> new IllegalStateException(
                  "the check-back endpoint needs a DataSource (the barrier answers) or a CheckBackDecider bean"));
      return new CheckBackHandler(
          new CheckBackVerifier(p.getSigningSecret(), p.getCheck().getTolerance(), Clock.systemUTC()), decider);
    }

    @Bean
    @ConditionalOnMissingBean
    TrustmsgCheckBackController trustmsgCheckBackController(CheckBackHandler handler) {
      return new TrustmsgCheckBackController(handler);
    }
  }
}
