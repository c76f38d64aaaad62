package io.trustmsg.spring;

import io.trustmsg.client.Barrier;
import io.trustmsg.client.CheckBackDecider;
import io.trustmsg.client.CheckBackHandler;
import io.trustmsg.client.CheckBackVerifier;
import java.time.Clock;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;

/**
 * The check-back endpoint of a Spring MVC application, answering from the barrier or the
 * application's decider.
 */
@AutoConfiguration(after = TrustmsgJdbcAutoConfiguration.class)
@EnableConfigurationProperties(TrustmsgProperties.class)
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
@ConditionalOnClass(name = "org.springframework.web.servlet.DispatcherServlet")
@ConditionalOnProperty(prefix = "trustmsg", name = "signing-secret")
@ConditionalOnProperty(prefix = "trustmsg.check", name = "enabled", matchIfMissing = true)
public class TrustmsgCheckBackAutoConfiguration {
  @Bean
  @ConditionalOnMissingBean
  CheckBackHandler trustmsgCheckBackHandler(
      TrustmsgProperties p, ObjectProvider<CheckBackDecider> deciders) {
    CheckBackDecider decider =
        deciders
            .orderedStream()
            .filter(d -> !(d instanceof Barrier))
            .findFirst()
            .or(() -> deciders.orderedStream().findFirst())
            .orElseThrow(
                () ->
                    new IllegalStateException(
                        "the check-back endpoint needs a DataSource (the barrier answers) or a CheckBackDecider bean"));
    return new CheckBackHandler(
        new CheckBackVerifier(p.getSigningSecret(), p.getCheck().getTolerance(), Clock.systemUTC()),
        decider);
  }

  @Bean
  @ConditionalOnMissingBean
  TrustmsgCheckBackController trustmsgCheckBackController(CheckBackHandler handler) {
    return new TrustmsgCheckBackController(handler);
  }
}
