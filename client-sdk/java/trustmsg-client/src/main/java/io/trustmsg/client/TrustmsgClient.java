package io.trustmsg.client;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A producer's client of trustmsg's HTTP API: prepare a message, then commit or roll it back once
 * the local transaction has decided. Thread-safe; build one per producer and share it.
 *
 * <pre>{@code
 * TrustmsgClient trustmsg = TrustmsgClient.builder("http://127.0.0.1:8080", "shop", token).build();
 * MessageView prepared = trustmsg.prepare(message);
 * // … the local transaction …
 * trustmsg.commit(message.messageKey());
 * }</pre>
 *
 * <p>Every call has a synchronous form and a {@link CompletableFuture} form ({@code prepareAsync},
 * …). Network errors and 5xx answers are retried with backoff ({@link RetryPolicy}); 4xx answers
 * throw at once ({@link ConflictException} for a 409, …). Every call is idempotent on trustmsg's
 * side (the same prepare twice is one message), so a retry never makes a second message.
 */
public final class TrustmsgClient implements TransactionalProducer<MessageView> {
  private static final Logger log = LoggerFactory.getLogger(TrustmsgClient.class);
  private static final Pattern BIZ_ID = Pattern.compile("[A-Za-z0-9._-]{1,64}");

  private final HttpClient http;
  private final URI base;
  private final String bizId;
  private final String token;
  private final RetryPolicy retry;
  private final Duration timeout;

  private TrustmsgClient(Builder b) {
    this.http =
        b.http != null
            ? b.http
            : HttpClient.newBuilder()
                .connectTimeout(Duration.ofSeconds(5))
                .followRedirects(HttpClient.Redirect.NEVER)
                .build();
    this.base = b.base;
    this.bizId = b.bizId;
    this.token = b.token;
    this.retry = b.retry;
    this.timeout = b.timeout;
  }

  /**
   * Starts a client.
   *
   * @param baseUrl trustmsg's base URL, e.g. {@code http://127.0.0.1:8080}
   * @param bizId the producer's id (its registration): 1 to 64 of {@code A-Z a-z 0-9 . _ -}
   * @param token the producer's bearer token
   */
  public static Builder builder(String baseUrl, String bizId, String token) {
    return new Builder(baseUrl, bizId, token);
  }

  @Override
  public String bizId() {
    return bizId;
  }

  /**
   * Stores the message as PREPARED (not yet delivered). The same prepare twice is one message, and
   * a prepare of a message already decided says so: a COMMITTED one is answered with its view
   * (status {@code COMMITTED}; {@code VERIFY_FAILED} likewise), a ROLLED_BACK one is refused with
   * {@link ConflictException} {@code already_rolled_back} ({@code rolled_back} for a key rolled
   * back before any prepare). The transaction helpers turn these into {@link
   * AlreadyCommittedException}, {@link AlreadyRolledBackException} and {@link
   * NotPreparedException}.
   */
  @Override
  public MessageView prepare(Message message) {
    return join(prepareAsync(message));
  }

  /** Marks the message COMMITTED: trustmsg delivers it to Kafka. */
  @Override
  public MessageView commit(String messageKey) {
    return join(commitAsync(messageKey));
  }

  /** Marks the message ROLLED_BACK: it is never delivered. */
  @Override
  public MessageView rollback(String messageKey) {
    return join(rollbackAsync(messageKey));
  }

  /** The message's current state. */
  public MessageView get(String messageKey) {
    return join(getAsync(messageKey));
  }

  public CompletableFuture<MessageView> prepareAsync(Message message) {
    Objects.requireNonNull(message, "message");
    byte[] body = Json.write(PrepareBody.of(bizId, message));
    return call("POST", uri("v1/messages/prepare"), body, message.traceHeaders());
  }

  public CompletableFuture<MessageView> commitAsync(String messageKey) {
    return decide("commit", messageKey);
  }

  public CompletableFuture<MessageView> rollbackAsync(String messageKey) {
    return decide("rollback", messageKey);
  }

  public CompletableFuture<MessageView> getAsync(String messageKey) {
    Objects.requireNonNull(messageKey, "messageKey");
    return call(
        "GET", uri("v1/messages/" + segment(bizId) + "/" + segment(messageKey)), null, Map.of());
  }

  private CompletableFuture<MessageView> decide(String what, String messageKey) {
    Objects.requireNonNull(messageKey, "messageKey");
    byte[] body = Json.write(Map.of("biz_id", bizId, "message_key", messageKey));
    return call("POST", uri("v1/messages/" + what), body, Map.of());
  }

  private URI uri(String path) {
    return base.resolve(path);
  }

  private static String segment(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
  }

  private CompletableFuture<MessageView> call(
      String method, URI uri, byte[] body, Map<String, String> headers) {
    HttpRequest.Builder rb =
        HttpRequest.newBuilder(uri)
            .timeout(timeout)
            .header("authorization", "Bearer " + token)
            .header("accept", "application/json");
    headers.forEach(rb::header);
    if (body != null) {
      rb.header("content-type", "application/json")
          .method(method, HttpRequest.BodyPublishers.ofByteArray(body));
    } else {
      rb.method(method, HttpRequest.BodyPublishers.noBody());
    }
    HttpRequest request = rb.build();
    CompletableFuture<MessageView> result = new CompletableFuture<>();
    attempt(request, 1, result);
    return result;
  }

  private void attempt(HttpRequest request, int n, CompletableFuture<MessageView> result) {
    http.sendAsync(request, HttpResponse.BodyHandlers.ofByteArray())
        .whenComplete(
            (response, error) -> {
              Transient t;
              if (error != null) {
                Throwable cause = error instanceof CompletionException ? error.getCause() : error;
                if (!(cause instanceof IOException)) {
                  result.completeExceptionally(cause);
                  return;
                }
                t = new Transient(0, null, describe(cause), null, cause);
              } else {
                try {
                  t = answer(response, result);
                } catch (RuntimeException e) {
                  result.completeExceptionally(e);
                  return;
                }
                if (t == null) {
                  return;
                }
              }
              if (n > retry.maxRetries()) {
                result.completeExceptionally(
                    new UnavailableException(n, t.status, t.code, t.message, t.cause));
                return;
              }
              Duration wait = retry.delay(n, t.retryAfter);
              log.warn(
                  "trustmsg {} {} failed ({}); retry {} of {} in {} ms",
                  request.method(),
                  request.uri().getPath(),
                  t.message,
                  n,
                  retry.maxRetries(),
                  wait.toMillis());
              Executor later =
                  CompletableFuture.delayedExecutor(wait.toMillis(), TimeUnit.MILLISECONDS);
              later.execute(
                  () -> {
                    if (!result.isDone()) {
                      attempt(request, n + 1, result);
                    }
                  });
            });
  }

  /** Completes {@code result} and returns null, or returns what to retry. */
  private static Transient answer(
      HttpResponse<byte[]> response, CompletableFuture<MessageView> result) {
    int status = response.statusCode();
    byte[] bytes = response.body();
    if (status >= 200 && status < 300) {
      try {
        result.complete(Json.read(bytes, MessageView.class));
      } catch (IOException e) {
        result.completeExceptionally(
            new UnexpectedResponseException(
                status, null, "the answer is not a message view: " + e.getMessage()));
      }
      return null;
    }
    String code = null;
    String message;
    try {
      JsonNode error = Json.MAPPER.readTree(bytes).path("error");
      code = error.path("code").isTextual() ? error.path("code").asText() : null;
      message = error.path("message").isTextual() ? error.path("message").asText() : null;
    } catch (IOException | RuntimeException e) {
      message = null;
    }
    if (message == null) {
      String text =
          new String(bytes, 0, Math.min(bytes.length, 200), StandardCharsets.UTF_8).trim();
      message = text.isEmpty() ? "HTTP " + status : "HTTP " + status + ": " + text;
    }
    if (status >= 500) {
      Duration retryAfter =
          response
              .headers()
              .firstValue("retry-after")
              .flatMap(TrustmsgClient::seconds)
              .orElse(null);
      return new Transient(status, code, message, retryAfter, null);
    }
    result.completeExceptionally(TrustmsgException.fromStatus(status, code, message));
    return null;
  }

  private static java.util.Optional<Duration> seconds(String v) {
    try {
      long s = Long.parseLong(v.trim());
      return s >= 0 ? java.util.Optional.of(Duration.ofSeconds(s)) : java.util.Optional.empty();
    } catch (NumberFormatException e) {
      return java.util.Optional.empty();
    }
  }

  private static String describe(Throwable e) {
    StringBuilder sb = new StringBuilder(e.getClass().getSimpleName());
    for (Throwable c = e; c != null; c = c.getCause()) {
      if (c.getMessage() != null) {
        sb.append(": ").append(c.getMessage());
      }
    }
    return sb.toString();
  }

  /** Waits for a call's future, throwing what it failed with (unwrapped). */
  static <T> T join(CompletableFuture<T> future) {
    try {
      return future.get();
    } catch (InterruptedException e) {
      future.cancel(true);
      Thread.currentThread().interrupt();
      throw new UnavailableException(0, 0, null, "interrupted while waiting for trustmsg", e);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException re) {
        throw re;
      }
      if (cause instanceof Error err) {
        throw err;
      }
      throw new UnavailableException(0, 0, null, describe(cause), cause);
    } catch (CancellationException e) {
      throw new UnavailableException(0, 0, null, "the call was cancelled", e);
    }
  }

  @Override
  public String toString() {
    return "TrustmsgClient[base=" + base + ", bizId=" + bizId + ", token=***, retry=" + retry + "]";
  }

  private record Transient(
      int status, String code, String message, Duration retryAfter, Throwable cause) {}

  /** {@code POST /v1/messages/prepare}'s body. */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  record PrepareBody(
      @JsonProperty("biz_id") String bizId,
      @JsonProperty("message_key") String messageKey,
      @JsonProperty("topic") String topic,
      @JsonProperty("key") String key,
      @JsonProperty("payload") String payload,
      @JsonProperty("payload_encoding") String payloadEncoding,
      @JsonProperty("headers") Map<String, String> headers,
      @JsonProperty("deliver_at") String deliverAt,
      @JsonProperty("deliver_after_ms") Long deliverAfterMs) {

    static PrepareBody of(String bizId, Message m) {
      byte[] bytes = m.payloadRef();
      return new PrepareBody(
          bizId,
          m.messageKey(),
          m.topic(),
          m.key().orElse(null),
          m.isBinary()
              ? Base64.getEncoder().encodeToString(bytes)
              : new String(bytes, StandardCharsets.UTF_8),
          m.isBinary() ? "base64" : null,
          m.headers().isEmpty() ? null : m.headers(),
          m.deliverAt()
              .map(
                  at ->
                      DateTimeFormatter.ISO_INSTANT.format(
                          at.truncatedTo(java.time.temporal.ChronoUnit.MILLIS)))
              .orElse(null),
          m.deliverAfter().map(Duration::toMillis).orElse(null));
    }
  }

  /** Builds a {@link TrustmsgClient}. */
  public static final class Builder {
    private final URI base;
    private final String bizId;
    private final String token;
    private HttpClient http;
    private RetryPolicy retry = RetryPolicy.defaults();
    private Duration timeout = Duration.ofSeconds(10);

    private Builder(String baseUrl, String bizId, String token) {
      Objects.requireNonNull(baseUrl, "baseUrl");
      Objects.requireNonNull(bizId, "bizId");
      Objects.requireNonNull(token, "token");
      URI uri;
      try {
        uri = URI.create(baseUrl.endsWith("/") ? baseUrl : baseUrl + "/");
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(
            "trustmsg base URL " + baseUrl + " is not a URL: " + e.getMessage(), e);
      }
      if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme()))
          || uri.getHost() == null) {
        throw new IllegalArgumentException(
            "trustmsg base URL " + baseUrl + " is not an http(s) URL with a host");
      }
      if (!BIZ_ID.matcher(bizId).matches()) {
        throw new IllegalArgumentException(
            "bizId "
                + bizId
                + " is not 1 to 64 of A-Z a-z 0-9 . _ - (the producer's registered id)");
      }
      if (token.isBlank()) {
        throw new IllegalArgumentException("the producer's token is empty");
      }
      this.base = uri;
      this.bizId = bizId;
      this.token = token;
    }

    /** How failed calls are repeated; {@link RetryPolicy#defaults()} unless set. */
    public Builder retry(RetryPolicy retry) {
      this.retry = Objects.requireNonNull(retry, "retry");
      return this;
    }

    /** Each request's timeout (10 s unless set). */
    public Builder timeout(Duration timeout) {
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("timeout must be positive, got " + timeout);
      }
      this.timeout = timeout;
      return this;
    }

    /** Your own {@link HttpClient} (TLS settings, proxy, executor). */
    public Builder httpClient(HttpClient http) {
      this.http = Objects.requireNonNull(http, "http");
      return this;
    }

    public TrustmsgClient build() {
      return new TrustmsgClient(this);
    }
  }
}
