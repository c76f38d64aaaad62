package io.trustmsg.example.orders;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.trustmsg.client.MessageView;
import io.trustmsg.client.TrustmsgClient;
import io.trustmsg.testkit.Kit;
import io.trustmsg.testkit.Topics;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The example, booted for real against the contract kit's trustmsg (its own producer registered
 * with the admin token), the kit's MariaDB and Kafka: a placed order reaches Kafka, a failed one
 * never does, their retries answer 200 (already placed) and 409 (refused), and one whose commit
 * call is lost is committed by check-back through the starter's Spring MVC endpoint.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class OrderServiceApplicationTest {
  static Kit.Producer producer;

  @BeforeAll
  static void kit() {
    Kit.require();
  }

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry r) {
    producer = Kit.register(Kit.unique("java-orders"), "http://127.0.0.1:9/not-yet");
    String mysql = Kit.env("TRUSTMSG_KIT_MYSQL_URL");
    r.add("spring.datasource.url", () -> Kit.jdbcUrl(mysql));
    r.add("spring.datasource.username", () -> Kit.credentials(mysql)[0]);
    r.add("spring.datasource.password", () -> Kit.credentials(mysql)[1]);
    r.add("trustmsg.url", Kit::url);
    r.add("trustmsg.biz-id", () -> producer.bizId());
    r.add("trustmsg.token", () -> producer.token());
    r.add("trustmsg.signing-secret", () -> producer.secret());
  }

  @LocalServerPort int port;
  @Autowired TrustmsgClient client;
  @Autowired JdbcTemplate jdbc;

  final HttpClient http = HttpClient.newHttpClient();

  HttpResponse<String> post(String json) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/orders"))
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  static boolean isOrder(ConsumerRecord<byte[], byte[]> r, String id) {
    return new String(r.value(), StandardCharsets.UTF_8).contains("\"order_id\":\"" + id + "\"");
  }

  @Test
  void aPlacedOrderReachesKafkaAndAFailedOneNever() throws Exception {
    String ok = Kit.unique("A");
    String failed = Kit.unique("B");
    assertThat(
            post("{\"order_id\":\"" + ok + "\",\"customer\":\"alice\",\"amount_cents\":1250}")
                .statusCode())
        .isEqualTo(201);
    HttpResponse<String> refused =
        post(
            "{\"order_id\":\""
                + failed
                + "\",\"customer\":\"bob\",\"amount_cents\":990,\"fail\":true}");
    assertThat(refused.statusCode()).isEqualTo(422);
    // The clients' retries: the placed order is "already placed", the failed one refused for good.
    assertThat(
            post("{\"order_id\":\"" + ok + "\",\"customer\":\"alice\",\"amount_cents\":1250}")
                .statusCode())
        .isEqualTo(200);
    assertThat(
            post("{\"order_id\":\"" + failed + "\",\"customer\":\"bob\",\"amount_cents\":990}")
                .statusCode())
        .isEqualTo(409);

    assertThat(
            jdbc.queryForObject(
                "SELECT COUNT(*) FROM placed_orders WHERE order_id = ?", Long.class, ok))
        .isEqualTo(1);
    assertThat(
            jdbc.queryForObject(
                "SELECT COUNT(*) FROM placed_orders WHERE order_id = ?", Long.class, failed))
        .isZero();
    assertThat(
            jdbc.queryForObject(
                "SELECT COUNT(*) FROM trustmsg_barrier WHERE message_key = ? AND op = 'commit'",
                Long.class,
                failed))
        .isZero();
    assertThat(client.get(failed).status()).isEqualTo("ROLLED_BACK");
    MessageView view = client.get(ok);
    assertThat(view.status()).isEqualTo("COMMITTED");

    var records =
        Topics.readUntil(
            "orders", Duration.ofSeconds(45), rs -> rs.stream().anyMatch(r -> isOrder(r, ok)));
    ConsumerRecord<byte[], byte[]> r =
        records.stream().filter(x -> isOrder(x, ok)).findFirst().orElseThrow();
    assertThat(Topics.key(r)).isEqualTo("alice");
    assertThat(new String(r.value(), StandardCharsets.UTF_8))
        .isEqualTo("{\"order_id\":\"" + ok + "\",\"customer\":\"alice\",\"amount_cents\":1250}");
    assertThat(Topics.header(r, "trustmsg-message-id")).isEqualTo(Long.toString(view.id()));
    assertThat(records).noneMatch(x -> isOrder(x, failed));
  }

  @Test
  void anOrderWhoseCommitIsLostIsCommittedByCheckBackThroughTheSpringEndpoint() throws Exception {
    Kit.updateVerifyUrl(producer.bizId(), "http://127.0.0.1:" + port + "/trustmsg/check");
    String lost = Kit.unique("C");
    assertThat(
            post("{\"order_id\":\""
                    + lost
                    + "\",\"customer\":\"carol\",\"amount_cents\":4200,\"lose_commit\":true}")
                .statusCode())
        .isEqualTo(202);
    assertThat(client.get(lost).status()).isEqualTo("PREPARED");
    MessageView v =
        Kit.eventually(
            Duration.ofSeconds(40),
            "check-back commits " + lost,
            () -> {
              MessageView m = client.get(lost);
              return m.isCommitted() ? m : null;
            });
    assertThat(v.verifyAttempts()).isGreaterThanOrEqualTo(1);
    JsonNode shown =
        Kit.JSON.readTree(
            http.send(
                    HttpRequest.newBuilder(
                            URI.create("http://127.0.0.1:" + port + "/orders/" + lost))
                        .build(),
                    HttpResponse.BodyHandlers.ofString())
                .body());
    assertThat(shown.get("message").asText()).isEqualTo("COMMITTED");
    HttpResponse<String> forged =
        http.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/trustmsg/check"))
                .header("content-type", "application/json")
                .POST(
                    HttpRequest.BodyPublishers.ofString(
                        "{\"biz_id\":\"x\",\"message_key\":\"y\",\"message_id\":1,\"attempt\":1,\"prepared_at\":\"2026-01-01T00:00:00Z\"}"))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(forged.statusCode()).isEqualTo(401);
    assertThat(
            jdbc.queryForObject(
                "SELECT COUNT(*) FROM trustmsg_barrier WHERE biz_id = 'x'", Long.class))
        .isZero();
  }
}
