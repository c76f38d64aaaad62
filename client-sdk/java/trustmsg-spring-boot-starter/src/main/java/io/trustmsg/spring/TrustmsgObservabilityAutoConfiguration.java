package io.trustmsg.spring;

import java.time.Duration;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Metrics and health, each only when its library is on the classpath: {@link TrustmsgMetrics} with
 * Micrometer ({@code micrometer-core}, which {@code spring-boot-starter-actuator} brings), {@link
 * TrustmsgHealthIndicator} with the actuator. Neither is a dependency of the starter.
 */
@AutoConfiguration(after = {TrustmsgAutoConfiguration.class, TrustmsgJdbcAutoConfiguration.class})
@EnableConfigurationProperties(TrustmsgProperties.class)
public class TrustmsgObservabilityAutoConfiguration {

  /** Micrometer's meters. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "io.micrometer.core.instrument.binder.MeterBinder")
  static class Metrics {
    @Bean
    @ConditionalOnMissingBean
    TrustmsgMetrics trustmsgMetrics(
        ObjectProvider<TrustmsgTemplate> templates, ObjectProvider<TrustmsgOutbox> outboxes) {
      return new TrustmsgMetrics(templates, outboxes);
    }
  }

  /** The actuator's health component {@code trustmsg}. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.boot.actuate.health.HealthIndicator")
  @ConditionalOnProperty(
      prefix = "management.health.trustmsg",
      name = "enabled",
      matchIfMissing = true)
  static class Health {
    @Bean
    @ConditionalOnMissingBean(name = "trustmsgHealthIndicator")
    TrustmsgHealthIndicator trustmsgHealthIndicator(
        TrustmsgProperties p, ObjectProvider<TrustmsgOutbox> outboxes) {
      return new TrustmsgHealthIndicator(p.getUrl(), outboxes.getIfUnique(), Duration.ofSeconds(2));
    }
  }
}
