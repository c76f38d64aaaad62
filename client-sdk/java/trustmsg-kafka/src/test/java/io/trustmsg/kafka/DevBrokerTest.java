package io.trustmsg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.trustmsg.client.Message;
import io.trustmsg.client.MessageView;
import io.trustmsg.client.TrustmsgClient;
import io.trustmsg.testkit.DevServer;
import io.trustmsg.testkit.Kit;
import io.trustmsg.testkit.Topics;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/**
 * A newcomer's first run: {@code trustmsg dev} (its in-process broker, librdkafka's mock cluster),
 * a message published through trustmsg with the demo producer from the env file it writes, and the
 * record read with the SDK's own Kafka client, kafka-clients: assigned from the beginning, and as a
 * consumer group member (subscribe, poll, commitSync) as an application reads it.
 */
class DevBrokerTest {

  /** Publishes order 42 to {@code orders} through trustmsg, as the demo producer; its view. */
  private static MessageView publishAnOrder(DevServer dev) throws Exception {
    TrustmsgClient client =
        TrustmsgClient.builder(
                dev.url(), dev.env("TRUSTMSG_DEMO_BIZ_ID"), dev.env("TRUSTMSG_DEMO_TOKEN"))
            .build();
    String key = Kit.unique("order");
    client.prepare(Message.builder(key, "orders").key("42").payload("{\"total\":42}").build());
    return client.commit(key);
  }

  @Test
  void kafka_clients_reads_what_trustmsg_dev_delivers() throws Exception {
    try (DevServer dev = DevServer.start()) {
      MessageView committed = publishAnOrder(dev);
      assertEquals("COMMITTED", committed.status());

      var assigned =
          Topics.readUntil(dev.brokers(), "orders", Duration.ofSeconds(30), r -> !r.isEmpty());
      assertEquals("{\"total\":42}", new String(assigned.get(0).value(), StandardCharsets.UTF_8));
      assertEquals("42", Topics.key(assigned.get(0)));
    }
  }

  /**
   * A consumer group member against the same broker: what Spring Kafka's {@code @KafkaListener}
   * does. librdkafka's mock cluster (2.12.1) advertises JoinGroup up to v6 and SyncGroup up to v4,
   * their first flexible versions, but reads those requests' array counts as INT32s, so
   * kafka-clients' JoinGroup v6 was cut off and the member never joined; {@code trustmsg dev} caps
   * the group APIs at the versions the mock reads right (kafka-mock, {@code cap_group_apis}).
   */
  @Test
  void kafka_clients_reads_trustmsg_dev_as_a_consumer_group_member() throws Exception {
    try (DevServer dev = DevServer.start()) {
      MessageView committed = publishAnOrder(dev);
      Map<String, Object> config =
          Map.of(
              ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
              dev.brokers(),
              ConsumerConfig.GROUP_ID_CONFIG,
              Kit.unique("java-dev-group"),
              ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
              "earliest",
              ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
              false);
      List<ConsumerRecord<String, String>> seen = new ArrayList<>();
      try (KafkaConsumer<String, String> consumer =
          new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
        consumer.subscribe(List.of("orders"));
        long deadline = System.nanoTime() + Duration.ofSeconds(45).toNanos();
        while (seen.isEmpty() && System.nanoTime() < deadline) {
          consumer.poll(Duration.ofMillis(500)).forEach(seen::add);
        }
        assertFalse(seen.isEmpty(), "the group member read nothing from trustmsg dev's broker");
        consumer.commitSync();
      }
      assertEquals("{\"total\":42}", seen.get(0).value());
      assertEquals(
          Long.toString(committed.id()),
          new String(
              seen.get(0).headers().lastHeader("trustmsg-message-id").value(),
              StandardCharsets.UTF_8));
    }
  }
}
