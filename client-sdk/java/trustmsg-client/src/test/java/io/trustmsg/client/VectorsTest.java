package io.trustmsg.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.trustmsg.testkit.Kit;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.OptionalLong;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** The contract kit's vectors that need no service: every case asserted. */
class VectorsTest {

  @TestFactory
  Iterable<DynamicTest> checkSignatures() {
    JsonNode file = Kit.vectors("check-signatures.json");
    Duration tolerance = Duration.ofSeconds(file.get("tolerance_secs").asLong());
    var tests = new java.util.ArrayList<DynamicTest>();
    for (JsonNode c : file.get("cases")) {
      tests.add(
          DynamicTest.dynamicTest(
              c.get("name").asText(),
              () -> {
                var verifier =
                    new CheckBackVerifier(c.get("secret").asText(), tolerance, Clock.systemUTC());
                Map<String, String> headers = new HashMap<>();
                c.get("headers")
                    .properties()
                    .forEach(e -> headers.put(e.getKey(), e.getValue().asText()));
                byte[] body = c.get("body").asText().getBytes(StandardCharsets.UTF_8);
                boolean valid;
                try {
                  verifier.verify(headers::get, body, c.get("now").asLong());
                  valid = true;
                } catch (InvalidSignatureException e) {
                  valid = false;
                }
                assertEquals(c.get("valid").asBoolean(), valid, c.get("why").asText());
              }));
    }
    assertTrue(tests.size() >= 15, "the vector file lost its cases");
    return tests;
  }

  @Test
  void checkBodiesParseAndAnswersEncode() throws Exception {
    JsonNode file = Kit.vectors("check-bodies.json");
    for (JsonNode c : file.get("requests")) {
      CheckRequest r =
          Json.read(c.get("body").asText().getBytes(StandardCharsets.UTF_8), CheckRequest.class);
      JsonNode want = c.get("request");
      assertEquals(want.get("biz_id").asText(), r.bizId(), c.get("name").asText());
      assertEquals(want.get("message_key").asText(), r.messageKey(), c.get("name").asText());
      assertEquals(want.get("message_id").asLong(), r.messageId(), c.get("name").asText());
      assertEquals(want.get("attempt").asInt(), r.attempt(), c.get("name").asText());
      assertEquals(want.get("prepared_at").asText(), r.preparedAt(), c.get("name").asText());
    }
    for (JsonNode a : file.get("answers")) {
      Decision d = Decision.valueOf(a.get("decision").asText().toUpperCase(java.util.Locale.ROOT));
      byte[] encoded = Json.write(new CheckResponse(a.get("message_id").asLong(), d));
      // Compared as JSON trees read with exact integers: 9007199254740993 must keep every digit.
      JsonNode got = Kit.JSON.readTree(encoded);
      assertEquals(a.get("answer"), got);
      assertEquals(a.get("answer").get("message_id").asText(), got.get("message_id").asText());
    }
  }

  @Test
  void checkBackHandlerAnswersTheVectorsAndRefusesForgeries() {
    JsonNode sigs = Kit.vectors("check-signatures.json");
    JsonNode good = sigs.get("cases").get(0);
    assertTrue(good.get("valid").asBoolean());
    Clock at =
        Clock.fixed(
            java.time.Instant.ofEpochSecond(good.get("now").asLong()), java.time.ZoneOffset.UTC);
    var handler =
        new CheckBackHandler(
            new CheckBackVerifier(
                good.get("secret").asText(), CheckBackVerifier.DEFAULT_TOLERANCE, at),
            req -> Decision.COMMIT);
    Map<String, String> headers = new HashMap<>();
    good.get("headers").properties().forEach(e -> headers.put(e.getKey(), e.getValue().asText()));
    var r =
        handler.handle(headers::get, good.get("body").asText().getBytes(StandardCharsets.UTF_8));
    assertEquals(200, r.status());
    assertEquals(
        "{\"message_id\":4711,\"decision\":\"commit\"}",
        new String(r.body(), StandardCharsets.UTF_8));
    for (JsonNode c : sigs.get("cases")) {
      if (c.get("valid").asBoolean() || c.get("now").asLong() != good.get("now").asLong()) {
        continue;
      }
      Map<String, String> h = new HashMap<>();
      c.get("headers").properties().forEach(e -> h.put(e.getKey(), e.getValue().asText()));
      var refused = handler.handle(h::get, c.get("body").asText().getBytes(StandardCharsets.UTF_8));
      assertEquals(401, refused.status(), c.get("name").asText());
    }
  }

  @Test
  void recordHeadersGiveTheInboxItsMessageId() {
    for (JsonNode c : Kit.vectors("record-headers.json").get("cases")) {
      String id = null;
      boolean present = false;
      for (JsonNode h : c.get("headers")) {
        if (h.get(0).asText().equals(Inbox.MESSAGE_ID_HEADER)) {
          present = true;
          id = h.get(1).isNull() ? null : h.get(1).asText();
        }
      }
      OptionalLong parsed = present ? Inbox.parseMessageId(id) : OptionalLong.empty();
      if (c.get("message_id").isNull()) {
        assertFalse(parsed.isPresent(), c.get("name").asText());
      } else {
        assertTrue(parsed.isPresent(), c.get("name").asText());
        assertEquals(
            c.get("message_id").asText(),
            Long.toUnsignedString(parsed.getAsLong()),
            c.get("name").asText());
      }
    }
  }

  @Test
  void outboxRowsThatTrustmsgWouldRefuseAreRefusedWithItsCode() {
    for (JsonNode c : Kit.vectors("outbox-rows.json").get("invalid")) {
      Message m = OutboxVectors.message(c.get("message"));
      var e =
          assertThrows(
              InvalidRequestException.class,
              () -> {
                MessageRules.check(m);
                m.deliverAfter().ifPresent(MessageRules::checkDelay);
              },
              c.get("name").asText());
      assertEquals(c.get("error").asText(), e.code().orElseThrow(), c.get("name").asText());
      assertEquals(400, e.status().getAsInt());
    }
  }

  @Test
  void aSecretThatIsNotWhsecIsRefusedWithAReason() {
    var e =
        assertThrows(IllegalArgumentException.class, () -> new CheckBackVerifier("not-a-secret"));
    assertTrue(e.getMessage().contains("whsec_"), e.getMessage());
  }
}
