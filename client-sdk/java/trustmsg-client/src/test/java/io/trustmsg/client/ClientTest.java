package io.trustmsg.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.context.Scope;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The client against a local HTTP server standing in for trustmsg: headers, trace context, errors.
 */
class ClientTest {
  static final String VIEW =
      "{\"id\":9007199254740993,\"biz_id\":\"shop\",\"message_key\":\"k\",\"status\":\"PREPARED\",\"verify_attempts\":0,"
          + "\"send_attempts\":0,\"payload_size\":2,\"created_at\":\"2026-01-01T00:00:00Z\",\"updated_at\":\"2026-01-01T00:00:00Z\",\"new_field\":1}";

  HttpServer server;
  final List<com.sun.net.httpserver.Headers> seen = new CopyOnWriteArrayList<>();
  final List<String> bodies = new CopyOnWriteArrayList<>();
  final AtomicInteger failures = new AtomicInteger();
  volatile int failStatus = 503;

  @BeforeEach
  void start() throws Exception {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/",
        ex -> {
          seen.add(ex.getRequestHeaders());
          bodies.add(new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
          byte[] body;
          int status;
          if (failures.getAndDecrement() > 0) {
            status = failStatus;
            body =
                "{\"error\":{\"code\":\"some_code\",\"message\":\"nope\"}}"
                    .getBytes(StandardCharsets.UTF_8);
          } else {
            status = 200;
            body = VIEW.getBytes(StandardCharsets.UTF_8);
          }
          ex.sendResponseHeaders(status, body.length);
          ex.getResponseBody().write(body);
          ex.close();
        });
    server.start();
  }

  @AfterEach
  void stop() {
    server.stop(0);
  }

  TrustmsgClient client(RetryPolicy retry) {
    return TrustmsgClient.builder(
            "http://127.0.0.1:" + server.getAddress().getPort(), "shop", "t0k")
        .retry(retry)
        .build();
  }

  @Test
  void prepareCarriesTheCurrentOpenTelemetryContext() {
    SpanContext ctx =
        SpanContext.create(
            "4bf92f3577b34da6a3ce929d0e0e4736",
            "00f067aa0ba902b7",
            TraceFlags.getSampled(),
            TraceState.getDefault());
    MessageView v;
    Scope scope = Span.wrap(ctx).makeCurrent();
    try {
      v = client(RetryPolicy.none()).prepare(Message.builder("k", "orders").payload("{}").build());
    } finally {
      scope.close();
    }
    assertEquals(9007199254740993L, v.id(), "64-bit ids keep every digit");
    assertEquals(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        seen.get(0).getFirst("traceparent"));
    assertEquals("Bearer t0k", seen.get(0).getFirst("authorization"));
    client(RetryPolicy.none()).prepare(Message.builder("k", "orders").payload("{}").build());
    assertNull(seen.get(1).getFirst("traceparent"), "no span, no traceparent");
  }

  @Test
  void thePrepareBodyIsTheApis() throws Exception {
    client(RetryPolicy.none())
        .prepare(
            Message.builder("k", "orders")
                .payload(new byte[] {0, (byte) 0xff})
                .key("c")
                .header("h", "v")
                .deliverAfter(Duration.ofSeconds(5))
                .build());
    var body = io.trustmsg.testkit.Kit.JSON.readTree(bodies.get(0));
    assertEquals("AP8=", body.get("payload").asText());
    assertEquals("base64", body.get("payload_encoding").asText());
    assertEquals("c", body.get("key").asText());
    assertEquals("v", body.get("headers").get("h").asText());
    assertEquals(5000, body.get("deliver_after_ms").asLong());
    assertFalse(body.has("deliver_at"));
  }

  @Test
  void a5xxIsRetriedUntilTheRetriesRunOut() {
    failures.set(10);
    var e =
        assertThrows(
            UnavailableException.class,
            () ->
                client(new RetryPolicy(2, Duration.ofMillis(10), Duration.ofMillis(20)))
                    .commit("k"));
    assertEquals(3, e.attempts());
    assertEquals(3, seen.size());
    assertEquals("some_code", e.code().orElseThrow());
    assertEquals(503, e.status().getAsInt());
    assertTrue(e.isUnavailable());
  }

  @Test
  void a400IsFinal() {
    failures.set(1);
    failStatus = 400;
    var e =
        assertThrows(
            InvalidRequestException.class, () -> client(RetryPolicy.defaults()).commit("k"));
    assertEquals(1, seen.size());
    assertEquals("some_code", e.code().orElseThrow());
  }

  @Test
  void aServiceThatIsNotThereIsUnavailableAfterTheRetries() {
    TrustmsgClient c =
        TrustmsgClient.builder("http://127.0.0.1:9", "shop", "t")
            .retry(new RetryPolicy(1, Duration.ofMillis(1), Duration.ofMillis(1)))
            .build();
    var e = assertThrows(UnavailableException.class, () -> c.get("k"));
    assertEquals(2, e.attempts());
  }

  @Test
  void badSettingsAreRefusedWithAReason() {
    assertThrows(
        IllegalArgumentException.class, () -> TrustmsgClient.builder("ftp://x", "shop", "t"));
    assertThrows(IllegalArgumentException.class, () -> TrustmsgClient.builder("http://x", "", "t"));
    assertThrows(
        IllegalArgumentException.class, () -> TrustmsgClient.builder("http://x", "shop", " "));
    assertThrows(
        IllegalArgumentException.class, () -> new RetryPolicy(-1, Duration.ZERO, Duration.ZERO));
    assertTrue(client(RetryPolicy.none()).toString().contains("***"), "the token is never shown");
  }

  @Test
  void theDefaultBackoffGrowsUpToItsCeiling() {
    RetryPolicy p = RetryPolicy.defaults();
    long previousMax = 0;
    for (int retry = 1; retry <= 8; retry++) {
      long d = p.delay(retry, null).toMillis();
      long ceiling = Math.min(100L << (retry - 1), 5000);
      assertTrue(d >= ceiling * 3 / 4 && d <= ceiling, "retry " + retry + " waits " + d + " ms");
      assertTrue(d >= previousMax * 3 / 4, "retry " + retry);
      previousMax = ceiling;
    }
    assertEquals(
        Duration.ofSeconds(60),
        p.delay(1, Duration.ofMinutes(10)),
        "Retry-After capped at a minute");
  }
}
