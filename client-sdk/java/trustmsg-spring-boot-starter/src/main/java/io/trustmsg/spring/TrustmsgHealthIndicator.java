package io.trustmsg.spring;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/**
 * The actuator's {@code trustmsg} health component: {@code DOWN} when trustmsg's {@code /readyz}
 * does not answer 200 within the timeout (its database or a worker is down: prepares would fail),
 * with the local message table's unrelayed rows ({@code outbox.pending}) and the oldest one's time
 * ({@code outbox.oldest}) as details. Disable it with {@code
 * management.health.trustmsg.enabled=false}; keep it out of a liveness group (a restart of your
 * application does not mend trustmsg).
 */
public class TrustmsgHealthIndicator extends AbstractHealthIndicator {
  private final URI readyz;
  private final TrustmsgOutbox outbox;
  private final HttpClient http;
  private final Duration timeout;

  /**
   * @param baseUrl trustmsg's base URL, or null to check only the outbox
   * @param outbox the local message table, or null
   * @param timeout how long {@code /readyz} may take
   */
  public TrustmsgHealthIndicator(String baseUrl, TrustmsgOutbox outbox, Duration timeout) {
    super("trustmsg health check failed");
    this.readyz = baseUrl == null ? null : URI.create(baseUrl.replaceAll("/+$", "") + "/readyz");
    this.outbox = outbox;
    this.timeout = timeout;
    this.http = HttpClient.newBuilder().connectTimeout(timeout).build();
  }

  @Override
  protected void doHealthCheck(Health.Builder builder) throws Exception {
    builder.up();
    if (readyz != null) {
      builder.withDetail("url", readyz.toString());
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(readyz).timeout(timeout).GET().build(),
              HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() != 200) {
        builder.down().withDetail("readyz", r.statusCode() + " " + r.body().strip());
      }
    }
    if (outbox != null) {
      TrustmsgOutbox.Pending p = outbox.pending();
      builder.withDetail("outbox.pending", p.rows());
      p.oldest().ifPresent(t -> builder.withDetail("outbox.oldest", t.toString()));
    }
  }
}
