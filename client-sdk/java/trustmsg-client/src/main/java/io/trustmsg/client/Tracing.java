package io.trustmsg.client;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import java.util.Map;
import java.util.TreeMap;

/**
 * The current OpenTelemetry trace context as W3C headers, when opentelemetry-api is on the
 * classpath (an optional dependency) and a valid span is current; otherwise none.
 */
final class Tracing {
  private static final boolean AVAILABLE = present();

  private Tracing() {}

  private static boolean present() {
    try {
      Class.forName("io.opentelemetry.api.trace.Span", false, Tracing.class.getClassLoader());
      return true;
    } catch (ClassNotFoundException | LinkageError e) {
      return false;
    }
  }

  static Map<String, String> currentTraceHeaders() {
    Map<String, String> headers = new TreeMap<>();
    if (AVAILABLE) {
      Otel.inject(headers);
    }
    return headers;
  }

  /** Loaded only when opentelemetry-api is present. */
  private static final class Otel {
    static void inject(Map<String, String> headers) {
      Context current = Context.current();
      if (!Span.fromContext(current).getSpanContext().isValid()) {
        return;
      }
      W3CTraceContextPropagator.getInstance()
          .inject(current, headers, (carrier, name, value) -> carrier.put(name, value));
    }
  }
}
