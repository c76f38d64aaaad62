package io.trustmsg.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.trustmsg.client.Barrier;
import io.trustmsg.client.CheckBackDecider;
import io.trustmsg.client.CheckBackHandler;
import io.trustmsg.client.Decision;
import io.trustmsg.client.TrustmsgClient;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration;
import org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;

/**
 * What the auto-configuration makes from trustmsg.*, and that it backs off for the user's beans.
 */
class TrustmsgAutoConfigurationTest {
  static final String SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

  final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  TrustmsgAutoConfiguration.class,
                  TrustmsgJdbcAutoConfiguration.class,
                  TrustmsgCheckBackAutoConfiguration.class));

  @Test
  void theClientIsMadeFromTheProperties() {
    runner
        .withPropertyValues(
            "trustmsg.url=http://127.0.0.1:8080", "trustmsg.biz-id=shop", "trustmsg.token=t0k")
        .run(
            ctx -> {
              assertThat(ctx).hasSingleBean(TrustmsgClient.class);
              assertThat(ctx.getBean(TrustmsgClient.class).bizId()).isEqualTo("shop");
            });
  }

  @Test
  void noUrlNoClient() {
    runner.run(ctx -> assertThat(ctx).doesNotHaveBean(TrustmsgClient.class));
  }

  @Test
  void aBizIdTrustmsgWouldRefuseFailsTheStartWithTheReason() {
    runner
        .withPropertyValues(
            "trustmsg.url=http://127.0.0.1:8080", "trustmsg.biz-id=shop/eu", "trustmsg.token=t")
        .run(
            ctx ->
                assertThat(ctx).getFailure().rootCause().hasMessageContaining("A-Z a-z 0-9 . _ -"));
  }

  @Test
  void itBacksOffWhenTheUserDefinesTheClient() {
    TrustmsgClient mine = TrustmsgClient.builder("http://127.0.0.1:1", "mine", "x").build();
    runner
        .withPropertyValues(
            "trustmsg.url=http://127.0.0.1:8080", "trustmsg.biz-id=shop", "trustmsg.token=t0k")
        .withBean(TrustmsgClient.class, () -> mine)
        .run(ctx -> assertThat(ctx.getBean(TrustmsgClient.class)).isSameAs(mine));
  }

  @Test
  void theCheckBackEndpointAnswersFromTheUsersDeciderWhenThereIsOne() {
    new WebApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                DataSourceAutoConfiguration.class,
                DataSourceTransactionManagerAutoConfiguration.class,
                TrustmsgAutoConfiguration.class,
                TrustmsgJdbcAutoConfiguration.class,
                TrustmsgCheckBackAutoConfiguration.class))
        .withPropertyValues(
            "trustmsg.signing-secret=" + SECRET,
            "spring.datasource.url=jdbc:postgresql://127.0.0.1:1/none")
        .withBean(CheckBackDecider.class, () -> req -> Decision.UNKNOWN)
        .run(
            ctx -> {
              assertThat(ctx).hasSingleBean(TrustmsgCheckBackController.class);
              assertThat(ctx).hasSingleBean(Barrier.class);
              CheckBackHandler handler = ctx.getBean(CheckBackHandler.class);
              assertThat(handler).isNotNull();
            });
  }

  @Test
  void theInboxNeedsAConsumerGroup() {
    ApplicationContextRunner jdbc =
        runner
            .withConfiguration(
                AutoConfigurations.of(
                    DataSourceAutoConfiguration.class,
                    DataSourceTransactionManagerAutoConfiguration.class))
            .withPropertyValues("spring.datasource.url=jdbc:postgresql://127.0.0.1:1/none");
    jdbc.run(ctx -> assertThat(ctx).doesNotHaveBean(TrustmsgInbox.class));
    jdbc.withPropertyValues("spring.kafka.consumer.group-id=billing")
        .run(
            ctx ->
                assertThat(ctx.getBean(TrustmsgInbox.class).consumerGroup()).isEqualTo("billing"));
    jdbc.withPropertyValues(
            "spring.kafka.consumer.group-id=billing", "trustmsg.inbox.group=invoices")
        .run(
            ctx ->
                assertThat(ctx.getBean(TrustmsgInbox.class).consumerGroup()).isEqualTo("invoices"));
  }

  /** Metrics and health come with their libraries, and stay away without them. */
  @Test
  void metricsAndHealthOnlyWithTheirLibraries() {
    ApplicationContextRunner jdbc =
        new ApplicationContextRunner()
            .withConfiguration(
                AutoConfigurations.of(
                    DataSourceAutoConfiguration.class,
                    DataSourceTransactionManagerAutoConfiguration.class,
                    TrustmsgAutoConfiguration.class,
                    TrustmsgJdbcAutoConfiguration.class,
                    TrustmsgObservabilityAutoConfiguration.class))
            .withPropertyValues("spring.datasource.url=jdbc:postgresql://127.0.0.1:1/none");
    jdbc.run(
        ctx -> {
          assertThat(ctx).hasSingleBean(TrustmsgMetrics.class);
          assertThat(ctx).hasSingleBean(TrustmsgHealthIndicator.class);
          assertThat(ctx).hasSingleBean(TrustmsgPublisher.class);
          assertThat(ctx).hasSingleBean(TrustmsgEventExternalizer.class);
        });
    jdbc.withClassLoader(new FilteredClassLoader("io.micrometer.core"))
        .run(
            ctx -> {
              assertThat(ctx).hasNotFailed();
              assertThat(ctx).doesNotHaveBean(TrustmsgMetrics.class);
              assertThat(ctx).hasSingleBean(TrustmsgHealthIndicator.class);
            });
    jdbc.withClassLoader(new FilteredClassLoader("org.springframework.boot.actuate"))
        .run(
            ctx -> {
              assertThat(ctx).hasNotFailed();
              assertThat(ctx).doesNotHaveBean(TrustmsgHealthIndicator.class);
            });
    jdbc.withPropertyValues("management.health.trustmsg.enabled=false")
        .run(ctx -> assertThat(ctx).doesNotHaveBean(TrustmsgHealthIndicator.class));
  }

  /** trustmsg unreachable: the indicator says DOWN, with why. */
  @Test
  void theHealthIsDownWhenTrustmsgDoesNotAnswer() {
    var health =
        new TrustmsgHealthIndicator("http://127.0.0.1:1", null, java.time.Duration.ofSeconds(1))
            .health();
    assertThat(health.getStatus()).isEqualTo(org.springframework.boot.actuate.health.Status.DOWN);
    assertThat(health.getDetails()).containsKey("error");
  }
}
