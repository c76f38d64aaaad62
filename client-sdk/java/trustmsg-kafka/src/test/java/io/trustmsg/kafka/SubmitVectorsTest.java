package io.trustmsg.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.trustmsg.client.InvalidRequestException;
import io.trustmsg.client.WebhookSigner;
import io.trustmsg.testkit.Kit;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** vectors/submit-records.json: every case signs to the same bytes and makes the same record. */
class SubmitVectorsTest {
  static final JsonNode FILE = Kit.vectors("submit-records.json");

  static SubmitRecord record(JsonNode c) {
    Map<String, String> headers = new LinkedHashMap<>();
    c.get("headers").properties().forEach(e -> headers.put(e.getKey(), e.getValue().asText()));
    byte[] value =
        c.has("value_base64")
            ? Base64.getDecoder().decode(c.get("value_base64").asText())
            : new byte[0];
    return SubmitRecord.of(
        c.get("op").asText(),
        c.get("biz_id").asText(),
        c.get("message_key").asText(),
        c.get("topic").asText(),
        c.get("key").isNull() ? null : c.get("key").asText(),
        headers,
        value);
  }

  @TestFactory
  List<DynamicTest> everyCaseSignsToTheSameBytes() {
    WebhookSigner signer = new WebhookSigner(FILE.get("secret").asText());
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : FILE.get("cases")) {
      tests.add(
          DynamicTest.dynamicTest(
              c.get("name").asText(),
              () -> {
                SubmitRecord r = record(c);
                assertArrayEquals(
                    Base64.getDecoder().decode(c.get("signing_input_base64").asText()),
                    r.signingInput());
                assertEquals(c.get("signature").asText(), r.signature(signer));
                ProducerRecord<byte[], byte[]> pr = r.toRecord("trustmsg.submit", signer);
                JsonNode want = c.get("record");
                assertEquals(
                    want.get("key").asText(), new String(pr.key(), StandardCharsets.UTF_8));
                assertArrayEquals(
                    Base64.getDecoder().decode(want.get("value_base64").asText()), pr.value());
                List<List<String>> got = new ArrayList<>();
                for (Header h : pr.headers()) {
                  got.add(List.of(h.key(), new String(h.value(), StandardCharsets.UTF_8)));
                }
                List<List<String>> expected = new ArrayList<>();
                want.get("headers")
                    .forEach(h -> expected.add(List.of(h.get(0).asText(), h.get(1).asText())));
                assertEquals(expected, got);
              }));
    }
    assertTrue(tests.size() >= 7);
    return tests;
  }

  @Test
  void ambiguousRecordsAreRefusedBeforeSigning() {
    for (JsonNode c : FILE.get("ambiguous")) {
      var e = assertThrows(InvalidRequestException.class, () -> record(c), c.get("name").asText());
      assertEquals("invalid_request", e.code().orElseThrow());
    }
  }

  @Test
  void theSubmittersOwnSettingsCannotBeWeakened() {
    var b = TrustmsgSubmitter.builder("127.0.0.1:9092", "shop", FILE.get("secret").asText());
    var e = assertThrows(IllegalArgumentException.class, () -> b.config("acks", "1"));
    assertTrue(e.getMessage().contains("acks=all"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> b.config("enable.idempotence", false));
  }
}
