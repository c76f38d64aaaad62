package io.trustmsg.spring;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.sql.SQLException;
import org.springframework.beans.factory.ObjectProvider;

/**
 * trustmsg's Micrometer meters, bound by Spring Boot's actuator to every {@code MeterRegistry}
 * (Prometheus, OTLP, …) like its own {@code jvm.*} and {@code hikaricp.*} binders:
 *
 * <ul>
 *   <li>{@code trustmsg.template.executions} (counter, tag {@code outcome}: {@code committed},
 *       {@code already_committed}, {@code already_rolled_back}, {@code failed}): the calls of
 *       {@link TrustmsgTemplate#execute};
 *   <li>{@code trustmsg.outbox.enqueued} (counter): the rows {@link TrustmsgOutbox} (and so {@link
 *       TrustmsgPublisher} and {@code @TrustmsgMessage} events) wrote;
 *   <li>{@code trustmsg.outbox.pending} (gauge): the rows of the local message table the relay has
 *       not relayed yet (read from the database at each scrape; NaN when it cannot be read). A
 *       number that keeps growing means the relay ({@code --outbox-source}) does not run or is
 *       behind.
 * </ul>
 *
 * Each meter is registered only when its bean exists.
 */
public class TrustmsgMetrics implements MeterBinder {
  private final ObjectProvider<TrustmsgTemplate> templates;
  private final ObjectProvider<TrustmsgOutbox> outboxes;

  /** The meters of the template and the outbox, whichever the context has. */
  public TrustmsgMetrics(
      ObjectProvider<TrustmsgTemplate> templates, ObjectProvider<TrustmsgOutbox> outboxes) {
    this.templates = templates;
    this.outboxes = outboxes;
  }

  @Override
  public void bindTo(MeterRegistry registry) {
    TrustmsgTemplate template = templates.getIfUnique();
    if (template != null) {
      for (TrustmsgTemplate.Outcome o : TrustmsgTemplate.Outcome.values()) {
        FunctionCounter.builder("trustmsg.template.executions", template, t -> (double) t.count(o))
            .description("TrustmsgTemplate.execute calls, by how they ended")
            .tag("outcome", o.name().toLowerCase(java.util.Locale.ROOT))
            .register(registry);
      }
    }
    TrustmsgOutbox outbox = outboxes.getIfUnique();
    if (outbox != null) {
      FunctionCounter.builder("trustmsg.outbox.enqueued", outbox, b -> (double) b.enqueuedCount())
          .description("rows written to the local message table by this process")
          .register(registry);
      Gauge.builder("trustmsg.outbox.pending", outbox, TrustmsgMetrics::pending)
          .description("rows of the local message table not relayed yet")
          .baseUnit("rows")
          .register(registry);
    }
  }

  private static double pending(TrustmsgOutbox outbox) {
    try {
      return outbox.pending().rows();
    } catch (SQLException | RuntimeException e) {
      return Double.NaN;
    }
  }
}
