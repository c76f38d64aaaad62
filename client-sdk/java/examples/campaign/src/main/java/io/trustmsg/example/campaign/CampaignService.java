package io.trustmsg.example.campaign;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.trustmsg.client.AlreadyCommittedException;
import io.trustmsg.client.AlreadyRolledBackException;
import io.trustmsg.client.Barrier;
import io.trustmsg.client.BarrierException;
import io.trustmsg.client.CheckBackHandler;
import io.trustmsg.client.Message;
import io.trustmsg.client.TrustmsgClient;
import io.trustmsg.client.TrustmsgTransactionTemplate;
import io.trustmsg.client.UnavailableException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Executors;
import javax.sql.DataSource;
import org.mariadb.jdbc.MariaDbDataSource;
import org.postgresql.ds.PGSimpleDataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The producer campaign's order service (client-sdk/conformance/campaign.md), on the JDK's HTTP
 * server: POST /orders stores the order and publishes "order created" through the barrier
 * transaction helper; POST /trustmsg/check answers check-backs from the barrier.
 */
public final class CampaignService {
  private static final Logger log = LoggerFactory.getLogger(CampaignService.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  /** The business step failed (the request asked it to): nothing is stored. */
  static final class OrderFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    OrderFailed(String orderId) {
      super("the business step of order " + orderId + " failed");
    }
  }

  private final String topic;
  private final TrustmsgClient trustmsg;
  private final TrustmsgTransactionTemplate template;
  private final TrustmsgTransactionTemplate dyingAfterLocalCommit;

  CampaignService(String topic, TrustmsgClient trustmsg, Barrier barrier) {
    this.topic = topic;
    this.trustmsg = trustmsg;
    this.template = new TrustmsgTransactionTemplate(trustmsg, barrier);
    // The documented test hook: right after the local COMMIT, before the decision is sent.
    this.dyingAfterLocalCommit = template.afterLocalCommit(m -> Runtime.getRuntime().halt(137));
  }

  public static void main(String[] args) throws Exception {
    DataSource db = dataSource(env("DATABASE_URL"));
    Barrier.createTables(db); // trustmsg_barrier, trustmsg_inbox (idempotent)
    try (Connection c = db.getConnection();
        Statement st = c.createStatement()) {
      st.execute(
          "CREATE TABLE IF NOT EXISTS orders "
              + "(order_id VARCHAR(64) PRIMARY KEY, amount_cents BIGINT NOT NULL)");
    }
    TrustmsgClient trustmsg =
        TrustmsgClient.builder(env("TRUSTMSG_URL"), env("TRUSTMSG_BIZ_ID"), env("TRUSTMSG_TOKEN"))
            .build();
    Barrier barrier = new Barrier(db);
    CampaignService service = new CampaignService(env("ORDERS_TOPIC"), trustmsg, barrier);

    int port = Integer.parseInt(env("PORT"));
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 128);
    server.setExecutor(Executors.newFixedThreadPool(32));
    server.createContext(
        CheckBackHandler.DEFAULT_PATH,
        new CheckBackHandler(env("TRUSTMSG_SIGNING_SECRET"), barrier));
    server.createContext("/health", ex -> reply(ex, 200, Map.of("status", "ok")));
    server.createContext("/orders", service::placeOrder);
    server.start();
    log.info("order service on 127.0.0.1:{}", port);
  }

  void placeOrder(HttpExchange ex) throws IOException {
    if (!"POST".equals(ex.getRequestMethod())) {
      reply(ex, 405, Map.of("status", "method not allowed"));
      return;
    }
    JsonNode order = JSON.readTree(ex.getRequestBody());
    String orderId = order.path("order_id").asText();
    long cents = order.path("amount_cents").asLong();
    boolean fail = order.path("fail").asBoolean(false);
    boolean crashBeforeAnswer = order.path("crash_before_answer").asBoolean(false);
    var helper =
        order.path("crash_after_local_commit").asBoolean(false) ? dyingAfterLocalCommit : template;

    Map<String, Object> payload = new LinkedHashMap<>();
    payload.put("order_id", orderId);
    payload.put("amount_cents", cents);
    Message message =
        Message.builder("order-" + orderId, topic)
            .key(orderId)
            .payload(JSON.writeValueAsBytes(payload))
            .header("content-type", "application/json")
            .build();

    int status;
    Map<String, Object> answer = new LinkedHashMap<>();
    try {
      helper.execute(
          message,
          conn -> {
            try (PreparedStatement st =
                conn.prepareStatement(
                    "INSERT INTO orders (order_id, amount_cents) VALUES (?, ?)")) {
              st.setString(1, orderId);
              st.setLong(2, cents);
              st.executeUpdate();
            }
            if (fail) {
              throw new OrderFailed(orderId); // after the insert: the rollback undoes it
            }
            return null;
          });
      status = 201;
      answer.put("status", "placed");
      try {
        answer.put("message_id", trustmsg.get(message.messageKey()).id());
      } catch (RuntimeException e) {
        // placed all the same: the id is only for the client's curiosity
      }
    } catch (AlreadyCommittedException e) {
      status = 200; // an earlier request stored it; nothing written now
      answer.put("status", "already_placed");
    } catch (AlreadyRolledBackException e) {
      status = 409; // rolled back before: this order id can never be placed
      answer.put("status", "refused");
    } catch (OrderFailed e) {
      status = 422; // rolled back locally and in trustmsg
      answer.put("status", "failed");
    } catch (UnavailableException | BarrierException | SQLException e) {
      // prepare could not reach trustmsg, or the database failed before anything was stored
      // (or the local COMMIT's outcome is unknown: the retry will find out from the barrier)
      log.warn("order {}: {}", orderId, e.toString());
      status = 503;
      answer.put("status", "unavailable");
    } catch (RuntimeException e) {
      // CommitRejectedException, RollbackRejectedException, NotPreparedException, …: a person looks
      log.error("order {} failed", orderId, e);
      status = 500;
      answer.put("status", "error");
      answer.put("error", e.toString());
    }
    if (crashBeforeAnswer) {
      Runtime.getRuntime().halt(137);
    }
    reply(ex, status, answer);
  }

  private static void reply(HttpExchange ex, int status, Map<String, Object> body)
      throws IOException {
    byte[] bytes = JSON.writeValueAsBytes(body);
    ex.getResponseHeaders().set("content-type", "application/json");
    ex.sendResponseHeaders(status, bytes.length);
    try (var out = ex.getResponseBody()) {
      out.write(bytes);
    }
  }

  private static String env(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) {
      throw new IllegalStateException(name + " is not set");
    }
    return v;
  }

  /** mysql://user[:password]@host:port/db or postgres://user:password@host:port/db. */
  static DataSource dataSource(String url) throws SQLException {
    URI u = URI.create(url);
    String[] user = (u.getUserInfo() == null ? "" : u.getUserInfo()).split(":", 2);
    if (u.getScheme().equals("mysql")) {
      var ds =
          new MariaDbDataSource(
              "jdbc:mariadb://" + u.getHost() + ":" + port(u, 3306) + u.getPath());
      ds.setUser(user[0]);
      if (user.length > 1) {
        ds.setPassword(user[1]);
      }
      return ds;
    }
    var ds = new PGSimpleDataSource();
    ds.setURL("jdbc:postgresql://" + u.getHost() + ":" + port(u, 5432) + u.getPath());
    ds.setUser(user[0]);
    ds.setPassword(user.length > 1 ? user[1] : null);
    return ds;
  }

  private static int port(URI u, int otherwise) {
    return u.getPort() < 0 ? otherwise : u.getPort();
  }
}
