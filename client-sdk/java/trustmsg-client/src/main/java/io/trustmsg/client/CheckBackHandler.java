package io.trustmsg.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The check-back endpoint, framework-free: verifies the call's signature, parses it, asks the
 * {@link CheckBackDecider} (usually the {@link Barrier}) and answers {@code
 * {"message_id":…,"decision":…}}. A call that does not verify gets 401 and reaches nothing else.
 *
 * <p>Serve it from any framework with {@link #handle(Function, byte[])}, or as it is from the JDK's
 * own HTTP server:
 *
 * <pre>{@code
 * HttpServer server = HttpServer.create(new InetSocketAddress(8081), 0);
 * server.createContext(CheckBackHandler.DEFAULT_PATH, new CheckBackHandler(secret, new Barrier(ds)));
 * server.start();
 * }</pre>
 */
public final class CheckBackHandler implements HttpHandler {
  private static final Logger log = LoggerFactory.getLogger(CheckBackHandler.class);

  /** The path the starter and the examples serve it on. */
  public static final String DEFAULT_PATH = "/trustmsg/check";

  /** The largest body read: a check-back request is a few hundred bytes. */
  public static final int MAX_BODY = 64 * 1024;

  private final CheckBackVerifier verifier;
  private final CheckBackDecider decider;

  public CheckBackHandler(String secret, CheckBackDecider decider) {
    this(new CheckBackVerifier(secret), decider);
  }

  public CheckBackHandler(CheckBackVerifier verifier, CheckBackDecider decider) {
    this.verifier = Objects.requireNonNull(verifier, "verifier");
    this.decider = Objects.requireNonNull(decider, "decider");
  }

  /** An HTTP answer: status and JSON body. */
  public record Response(int status, byte[] body) {
    public String contentType() {
      return "application/json";
    }
  }

  /**
   * Handles one call.
   *
   * @param header the request's header of a lower-case name, null when absent
   * @param body the raw body bytes as received
   */
  public Response handle(Function<String, String> header, byte[] body) {
    try {
      verifier.verify(header, body);
    } catch (InvalidSignatureException e) {
      log.warn("check-back refused ({}): {}", e.code(), e.getMessage());
      return error(401, e.code(), e.getMessage());
    }
    CheckRequest request;
    try {
      JsonNode tree = Json.MAPPER.readTree(body);
      if (tree == null || !tree.isObject()) {
        return error(400, "bad_body", "not a check-back request: not a JSON object");
      }
      JsonNode id = tree.get("message_id");
      if (id == null || !id.canConvertToExactIntegral() || !id.canConvertToLong()) {
        return error(
            400, "bad_body", "not a check-back request: message_id is not a 64-bit integer");
      }
      request = Json.MAPPER.treeToValue(tree, CheckRequest.class);
    } catch (IOException | IllegalArgumentException e) {
      return error(400, "bad_body", "not a check-back request: " + e.getMessage());
    }
    Decision decision;
    try {
      decision = Objects.requireNonNull(decider.decide(request), "the decider answered null");
    } catch (Exception e) {
      log.error(
          "check-back of {}/{} (message {}) could not be decided",
          request.bizId(),
          request.messageKey(),
          request.messageId(),
          e);
      return error(500, "decision_failed", "the producer could not decide; ask again later");
    }
    log.info(
        "check-back of {}/{} (message {}, attempt {}) answered {}",
        request.bizId(),
        request.messageKey(),
        request.messageId(),
        request.attempt(),
        decision.wire());
    return new Response(200, Json.write(new CheckResponse(request.messageId(), decision)));
  }

  @Override
  public void handle(HttpExchange exchange) throws IOException {
    try (exchange) {
      Response r;
      if (!"POST".equalsIgnoreCase(exchange.getRequestMethod())) {
        exchange.getResponseHeaders().set("allow", "POST");
        r = error(405, "method_not_allowed", "check-back calls are POST");
      } else {
        byte[] body = readBody(exchange.getRequestBody());
        r =
            body == null
                ? error(413, "too_large", "a check-back body is at most " + MAX_BODY + " bytes")
                : handle(
                    name -> exchange.getRequestHeaders().getFirst(name.toLowerCase(Locale.ROOT)),
                    body);
      }
      exchange.getResponseHeaders().set("content-type", r.contentType());
      exchange.sendResponseHeaders(r.status(), r.body().length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(r.body());
      }
    }
  }

  private static byte[] readBody(InputStream in) throws IOException {
    byte[] body = in.readNBytes(MAX_BODY + 1);
    return body.length > MAX_BODY ? null : body;
  }

  static Response error(int status, String code, String message) {
    return new Response(
        status, Json.write(Map.of("error", Map.of("code", code, "message", message))));
  }
}
