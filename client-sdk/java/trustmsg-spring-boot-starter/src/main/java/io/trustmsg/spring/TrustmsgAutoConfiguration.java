package io.trustmsg.spring;

import io.trustmsg.client.RetryPolicy;
import io.trustmsg.client.TrustmsgClient;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;

/**
 * trustmsg for Spring Boot, from {@code trustmsg.*}: the {@link TrustmsgClient} (when {@code
 * trustmsg.url} is set). {@link TrustmsgJdbcAutoConfiguration} adds the barrier, {@link
 * TrustmsgTemplate} and {@link TrustmsgInbox}; {@link TrustmsgCheckBackAutoConfiguration} the
 * check-back endpoint. Every bean backs off when the application defines its own.
 */
@AutoConfiguration
@EnableConfigurationProperties(TrustmsgProperties.class)
public class TrustmsgAutoConfiguration {
  @Bean
  @ConditionalOnMissingBean(TrustmsgClient.class)
  @ConditionalOnProperty(prefix = "trustmsg", name = "url")
  public TrustmsgClient trustmsgClient(TrustmsgProperties p) {
    if (p.getBizId() == null || p.getToken() == null) {
      throw new IllegalStateException(
          "trustmsg.url is set: set trustmsg.biz-id and trustmsg.token too (the producer's registration)");
    }
    TrustmsgProperties.Retry r = p.getRetry();
    return TrustmsgClient.builder(p.getUrl(), p.getBizId(), p.getToken())
        .retry(new RetryPolicy(r.getMaxRetries(), r.getMinDelay(), r.getMaxDelay()))
        .build();
  }
}
