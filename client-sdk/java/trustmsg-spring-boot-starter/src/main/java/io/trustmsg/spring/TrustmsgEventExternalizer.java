package io.trustmsg.spring;

import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.context.ApplicationListener;
import org.springframework.context.PayloadApplicationEvent;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.env.PropertyResolver;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.expression.spel.support.StandardEvaluationContext;

/**
 * Writes every published application event whose type is annotated {@link TrustmsgMessage} to the
 * local message table, through {@link TrustmsgPublisher}, in the publisher's transaction (Spring
 * calls application listeners synchronously, on the publishing thread: the row joins the
 * transaction of the {@code @Transactional} method that published the event). Modelled on Spring
 * Modulith's event externalization; unlike its registry, the row is written at {@code
 * publishEvent}, so a failure (no transaction, a message trustmsg would refuse, the database)
 * surfaces there, inside your method, and rolls the transaction back.
 *
 * <p>An application that multicasts events asynchronously (a {@code
 * SimpleApplicationEventMulticaster} with a task executor) has no transaction on the listener's
 * thread: call {@link TrustmsgPublisher#publish} instead.
 */
public class TrustmsgEventExternalizer implements ApplicationListener<PayloadApplicationEvent<?>> {
  private final TrustmsgPublisher publisher;
  private final PropertyResolver properties;
  private final SpelExpressionParser parser = new SpelExpressionParser();
  private final Map<Class<?>, Plan> plans = new ConcurrentHashMap<>();

  /** Externalizes through {@code publisher}; topics are taken as they are written. */
  public TrustmsgEventExternalizer(TrustmsgPublisher publisher) {
    this(publisher, null);
  }

  /**
   * Externalizes through {@code publisher}, resolving {@code ${…}} placeholders of a topic (e.g.
   * {@code topic = "${orders.topic}"}) with {@code properties} (the application's {@code
   * Environment}).
   */
  public TrustmsgEventExternalizer(TrustmsgPublisher publisher, PropertyResolver properties) {
    this.publisher = Objects.requireNonNull(publisher, "publisher");
    this.properties = properties;
  }

  private record Plan(String topic, Expression messageKey, Expression key) {}

  private static final Plan NONE = new Plan("", null, null);

  @Override
  public void onApplicationEvent(PayloadApplicationEvent<?> event) {
    Object payload = event.getPayload();
    Plan plan = plans.computeIfAbsent(payload.getClass(), this::plan);
    if (plan == NONE) {
      return;
    }
    StandardEvaluationContext ctx = new StandardEvaluationContext(payload);
    String messageKey = plan.messageKey().getValue(ctx, String.class);
    if (messageKey == null || messageKey.isEmpty()) {
      throw new IllegalArgumentException(
          "@TrustmsgMessage of " + payload.getClass().getName() + ": the message key is empty");
    }
    String key = plan.key() == null ? null : plan.key().getValue(ctx, String.class);
    publisher.publish(messageKey, plan.topic(), key, payload);
  }

  private Plan plan(Class<?> type) {
    TrustmsgMessage m = AnnotatedElementUtils.findMergedAnnotation(type, TrustmsgMessage.class);
    if (m == null) {
      return NONE;
    }
    return new Plan(
        properties == null ? m.topic() : properties.resolveRequiredPlaceholders(m.topic()),
        parser.parseExpression(m.messageKey()),
        m.key().isEmpty() ? null : parser.parseExpression(m.key()));
  }
}
