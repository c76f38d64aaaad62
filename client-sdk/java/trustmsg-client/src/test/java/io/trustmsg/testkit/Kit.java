package io.trustmsg.testkit;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.URLDecoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.Callable;
import javax.sql.DataSource;
import org.junit.jupiter.api.Assumptions;
import org.mariadb.jdbc.MariaDbDataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * What the contract kit (client-sdk/conformance/kit) hands the tests: the real trustmsg, its fault
 * proxy, Kafka, and the producer's MariaDB and PostgreSQL databases. Without the kit the scenario
 * tests are skipped, unless -Dtrustmsg.kit.required=true (client-sdk/java/test sets it).
 */
public final class Kit {
  public static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient HTTP = HttpClient.newHttpClient();

  private Kit() {}

  /** The kit's environment, or the test is skipped (failed when the kit is required). */
  public static void require() {
    if (System.getenv("TRUSTMSG_KIT_URL") == null) {
      if (Boolean.getBoolean("trustmsg.kit.required")) {
        fail(
            "TRUSTMSG_KIT_URL is not set: run the tests under client-sdk/conformance/kit run -- …");
      }
      Assumptions.abort(
          "not under the contract kit (client-sdk/conformance/kit run -- mvn verify)");
    }
  }

  public static String env(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) {
      require();
      fail(name + " is not set by the kit");
    }
    return v;
  }

  public static String url() {
    return env("TRUSTMSG_KIT_URL");
  }

  public static String proxyUrl() {
    return env("TRUSTMSG_KIT_PROXY_URL");
  }

  public static String kafka() {
    return env("TRUSTMSG_KIT_KAFKA");
  }

  /** A name with a random part: tests share the service and the databases. */
  public static String unique(String prefix) {
    return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  /** One of the kit's vector files (the kit's folder even without the kit). */
  public static JsonNode vectors(String file) {
    String dir = System.getenv("TRUSTMSG_KIT_VECTORS");
    Path path;
    if (dir != null) {
      path = Path.of(dir, file);
    } else {
      Path here = Path.of("").toAbsolutePath();
      while (here != null && !Files.isDirectory(here.resolve("client-sdk/conformance/vectors"))) {
        here = here.getParent();
      }
      assertTrue(
          here != null, "client-sdk/conformance/vectors not found above the working directory");
      path = here.resolve("client-sdk/conformance/vectors").resolve(file);
    }
    try {
      return JSON.readTree(path.toFile());
    } catch (IOException e) {
      throw new IllegalStateException("reading " + path, e);
    }
  }

  /** The producer databases. */
  public enum Db {
    MYSQL,
    POSTGRES;

    public DataSource dataSource() {
      return Kit.dataSource(
          env(this == MYSQL ? "TRUSTMSG_KIT_MYSQL_URL" : "TRUSTMSG_KIT_POSTGRES_URL"));
    }
  }

  /** A DataSource of the real driver for a kit URL (mysql://… or postgres://…). */
  public static DataSource dataSource(String kitUrl) {
    URI u = URI.create(kitUrl);
    String user = null;
    String password = null;
    if (u.getRawUserInfo() != null) {
      String[] parts = u.getRawUserInfo().split(":", 2);
      user = URLDecoder.decode(parts[0], StandardCharsets.UTF_8);
      password = parts.length > 1 ? URLDecoder.decode(parts[1], StandardCharsets.UTF_8) : null;
    }
    try {
      if (u.getScheme().startsWith("mysql") || u.getScheme().startsWith("mariadb")) {
        MariaDbDataSource ds =
            new MariaDbDataSource(
                "jdbc:mariadb://"
                    + u.getHost()
                    + ":"
                    + (u.getPort() < 0 ? 3306 : u.getPort())
                    + u.getPath());
        ds.setUser(user);
        if (password != null) {
          ds.setPassword(password);
        }
        return ds;
      }
      PGSimpleDataSource ds = new PGSimpleDataSource();
      ds.setURL(
          "jdbc:postgresql://"
              + u.getHost()
              + ":"
              + (u.getPort() < 0 ? 5432 : u.getPort())
              + u.getPath());
      ds.setUser(user);
      ds.setPassword(password);
      return ds;
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A producer's registration: its token and signing secret. */
  public record Producer(String bizId, String token, String secret) {}

  /** Registers a producer of its own with the admin token. */
  public static Producer register(String bizId, String verifyUrl) {
    return register(bizId, verifyUrl, 1000);
  }

  /** Registers a producer whose first check-back comes {@code firstVerifyAfterMs} after prepare. */
  public static Producer register(String bizId, String verifyUrl, long firstVerifyAfterMs) {
    ObjectMapper m = JSON;
    var body = m.createObjectNode();
    body.put("verify_url", verifyUrl);
    body.put("first_verify_after_ms", firstVerifyAfterMs);
    body.put("verify_timeout_ms", 10000);
    JsonNode answer =
        send(
            "PUT",
            url() + "/v1/producers/" + bizId,
            body.toString(),
            Map.of("authorization", "Bearer " + env("TRUSTMSG_KIT_ADMIN_TOKEN")),
            201);
    return new Producer(bizId, answer.get("token").asText(), answer.get("signing_secret").asText());
  }

  /**
   * Points a registered producer's check-back at {@code verifyUrl} (its token and secret
   * unchanged).
   */
  public static void updateVerifyUrl(String bizId, String verifyUrl) {
    var body = JSON.createObjectNode();
    body.put("verify_url", verifyUrl);
    body.put("first_verify_after_ms", 1000);
    body.put("verify_timeout_ms", 10000);
    send(
        "PUT",
        url() + "/v1/producers/" + bizId,
        body.toString(),
        Map.of("authorization", "Bearer " + env("TRUSTMSG_KIT_ADMIN_TOKEN")),
        200);
  }

  /** A kit database URL as a JDBC URL (user and password left out). */
  public static String jdbcUrl(String kitUrl) {
    URI u = URI.create(kitUrl);
    boolean mysql = u.getScheme().startsWith("mysql") || u.getScheme().startsWith("mariadb");
    return (mysql ? "jdbc:mariadb://" : "jdbc:postgresql://")
        + u.getHost()
        + ":"
        + (u.getPort() < 0 ? (mysql ? 3306 : 5432) : u.getPort())
        + u.getPath();
  }

  /** The user and password of a kit database URL ("" when none). */
  public static String[] credentials(String kitUrl) {
    String info = URI.create(kitUrl).getRawUserInfo();
    if (info == null) {
      return new String[] {"", ""};
    }
    String[] parts = info.split(":", 2);
    return new String[] {
      URLDecoder.decode(parts[0], StandardCharsets.UTF_8),
      parts.length > 1 ? URLDecoder.decode(parts[1], StandardCharsets.UTF_8) : ""
    };
  }

  /**
   * The proxy fails the next {@code count} requests containing {@code match} with {@code status}.
   */
  public static void fault(String match, int status, int count) {
    var body = JSON.createObjectNode();
    body.put("match", match);
    body.put("status", status);
    body.put("count", count);
    send("POST", proxyUrl() + "/_kit/faults", body.toString(), Map.of(), 204);
  }

  /** Every request the proxy saw containing {@code match}, in order. */
  public static List<JsonNode> requests(String match) {
    JsonNode all =
        send(
            "GET",
            proxyUrl()
                + "/_kit/requests?match="
                + java.net.URLEncoder.encode(match, StandardCharsets.UTF_8),
            null,
            Map.of(),
            200);
    List<JsonNode> out = new ArrayList<>();
    all.forEach(out::add);
    return out;
  }

  public static JsonNode send(
      String method, String url, String body, Map<String, String> headers, int expect) {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30));
    headers.forEach(b::header);
    if (body != null) {
      b.header("content-type", "application/json");
      b.method(method, HttpRequest.BodyPublishers.ofString(body));
    } else {
      b.method(method, HttpRequest.BodyPublishers.noBody());
    }
    try {
      HttpResponse<String> r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() != expect) {
        fail(method + " " + url + " answered " + r.statusCode() + ": " + r.body());
      }
      return r.body().isEmpty() ? JSON.nullNode() : JSON.readTree(r.body());
    } catch (IOException e) {
      throw new IllegalStateException(method + " " + url, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** Polls {@code check} until it returns non-null, or fails after {@code timeout}. */
  public static <T> T eventually(Duration timeout, String what, Callable<T> check) {
    long deadline = System.nanoTime() + timeout.toNanos();
    Exception last = null;
    while (System.nanoTime() < deadline) {
      try {
        T v = check.call();
        if (v != null) {
          return v;
        }
      } catch (Exception e) {
        last = e;
      }
      try {
        Thread.sleep(200);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
    throw new AssertionError("not within " + timeout + ": " + what, last);
  }

  /** How many rows {@code sql} (a SELECT COUNT(*) with bound string parameters) counts. */
  public static long count(DataSource ds, String sql, String... params) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement st = c.prepareStatement(sql)) {
      for (int i = 0; i < params.length; i++) {
        st.setString(i + 1, params[i]);
      }
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  /** Runs one statement (DDL of a test's own table). */
  public static void execute(DataSource ds, String sql) throws SQLException {
    try (Connection c = ds.getConnection();
        var st = c.createStatement()) {
      st.execute(sql);
    }
  }
}
