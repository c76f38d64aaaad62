package io.trustmsg.testkit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** Reads a topic of the kit's Kafka from the beginning, without a consumer group. */
public final class Topics {
  private Topics() {}

  /**
   * Reads {@code topic} from the beginning until {@code until} holds for the records read so far
   * (the topic appears with its first record, so this waits for it), or fails after {@code
   * timeout}.
   */
  public static List<ConsumerRecord<byte[], byte[]>> readUntil(
      String topic, Duration timeout, Predicate<List<ConsumerRecord<byte[], byte[]>>> until) {
    return readUntil(Kit.kafka(), topic, timeout, until);
  }

  /** {@link #readUntil(String, Duration, Predicate)} from the broker at {@code bootstrap}. */
  public static List<ConsumerRecord<byte[], byte[]>> readUntil(
      String bootstrap,
      String topic,
      Duration timeout,
      Predicate<List<ConsumerRecord<byte[], byte[]>>> until) {
    Map<String, Object> config =
        Map.of(
            ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
            bootstrap,
            ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
            false,
            ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
            "earliest",
            ConsumerConfig.CLIENT_ID_CONFIG,
            "trustmsg-java-tests");
    long deadline = System.nanoTime() + timeout.toNanos();
    List<ConsumerRecord<byte[], byte[]>> seen = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      List<TopicPartition> partitions = new ArrayList<>();
      while (partitions.isEmpty()) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError("topic " + topic + " did not appear within " + timeout);
        }
        List<PartitionInfo> infos;
        try {
          infos = consumer.partitionsFor(topic, Duration.ofSeconds(2));
        } catch (org.apache.kafka.common.KafkaException e) {
          infos = List.of();
        }
        if (infos == null || infos.isEmpty()) {
          sleep(300);
          continue;
        }
        for (PartitionInfo p : infos) {
          partitions.add(new TopicPartition(topic, p.partition()));
        }
      }
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      while (!until.test(seen)) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError(
              "reading "
                  + topic
                  + ": not within "
                  + timeout
                  + " ("
                  + seen.size()
                  + " records read)");
        }
        consumer.poll(Duration.ofMillis(500)).forEach(seen::add);
      }
      return seen;
    }
  }

  /** The value of the last header {@code name} of a record, as UTF-8, or null. */
  public static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    var h = r.headers().lastHeader(name);
    return h == null || h.value() == null
        ? null
        : new String(h.value(), java.nio.charset.StandardCharsets.UTF_8);
  }

  public static String key(ConsumerRecord<byte[], byte[]> r) {
    return r.key() == null ? null : new String(r.key(), java.nio.charset.StandardCharsets.UTF_8);
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
