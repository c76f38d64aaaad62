package io.trustmsg.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.trustmsg.client.Barrier;
import io.trustmsg.client.Inbox;
import io.trustmsg.client.Message;
import io.trustmsg.client.MessageView;
import io.trustmsg.client.TrustmsgClient;
import io.trustmsg.client.TrustmsgTransactionTemplate;
import io.trustmsg.testkit.Kit;
import io.trustmsg.testkit.Topics;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * S08, the Kafka way in, against the kit's trustmsg and Kafka; the inbox on kafka-clients records.
 */
class KafkaScenarioTest {

  @BeforeAll
  static void kit() throws Exception {
    Kit.require();
    Barrier.createTables(Kit.Db.MYSQL.dataSource());
  }

  @Test
  void S08_the_kafka_way_in_delivers() throws Exception {
    Kit.Producer p = Kit.register(Kit.unique("java-s08"), "http://127.0.0.1:9/unused");
    String topic = Kit.unique("java.s08");
    String key = Kit.unique("order");
    byte[] payload = {'k', 0, (byte) 0xfe, '!'};
    DataSource ds = Kit.Db.MYSQL.dataSource();
    try (TrustmsgSubmitter submitter =
        TrustmsgSubmitter.builder(Kit.kafka(), p.bizId(), p.secret())
            .topic(Kit.env("TRUSTMSG_KIT_SUBMIT_TOPIC"))
            .config("delivery.timeout.ms", 30000)
            .build()) {
      var template = new TrustmsgTransactionTemplate(submitter, new Barrier(ds));
      template.execute(
          Message.builder(key, topic)
              .payload(payload)
              .key("customer-8")
              .header("x-way", "kafka")
              .build(),
          conn -> null);
    }
    TrustmsgClient http = TrustmsgClient.builder(Kit.url(), p.bizId(), p.token()).build();
    MessageView v =
        Kit.eventually(
            Duration.ofSeconds(40),
            "COMMITTED via Kafka",
            () -> {
              try {
                MessageView m = http.get(key);
                return m.isCommitted() ? m : null;
              } catch (io.trustmsg.client.NotFoundException e) {
                return null;
              }
            });
    var records = Topics.readUntil(topic, Duration.ofSeconds(45), r -> !r.isEmpty());
    ConsumerRecord<byte[], byte[]> r = records.get(0);
    assertArrayEquals(payload, r.value());
    assertEquals("customer-8", Topics.key(r));
    assertEquals("kafka", Topics.header(r, "x-way"));
    assertEquals(Long.toString(v.id()), Topics.header(r, "trustmsg-message-id"));

    // The inbox on that very record: once, then a repeat.
    KafkaInbox inbox = new KafkaInbox(new Inbox(ds, Kit.unique("java-s08-group")));
    assertEquals("first", inbox.process(r, conn -> "first").value());
    assertEquals(true, inbox.process(r, conn -> "again").isRepeat());
    var foreign =
        new ConsumerRecord<>(
            topic,
            0,
            0L,
            0L,
            TimestampType.CREATE_TIME,
            0,
            0,
            "k".getBytes(StandardCharsets.UTF_8),
            new byte[0],
            new RecordHeaders(),
            java.util.Optional.empty());
    assertThrows(IllegalArgumentException.class, () -> inbox.process(foreign, conn -> "never"));
  }
}
