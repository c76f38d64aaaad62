package io.trustmsg.testkit;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.Utils;

/**
 * A kafka-clients {@code Producer} that really writes to the kit's broker through {@link RawKafka}
 * (Produce v3, acks=all, partitioned by the key's murmur2 as kafka-clients does), for the tests
 * only, while kafka-clients' own producer cannot talk to the kit's broker (see {@link KafkaProbe}).
 * The records, their signatures and headers are the SDK's, byte for byte.
 */
public final class RawProducer extends MockProducer<byte[], byte[]> {
  private final String bootstrap;

  public RawProducer(String bootstrap) {
    super(true, new ByteArraySerializer(), new ByteArraySerializer());
    this.bootstrap = bootstrap;
  }

  @Override
  public synchronized Future<RecordMetadata> send(
      ProducerRecord<byte[], byte[]> record, Callback callback) {
    CompletableFuture<RecordMetadata> done = new CompletableFuture<>();
    try (RawKafka boot = RawKafka.bootstrap(bootstrap)) {
      List<RawKafka.Leader> leaders = boot.metadata(record.topic());
      for (int i = 0; i < 50 && leaders.isEmpty(); i++) {
        Thread.sleep(200);
        leaders = boot.metadata(record.topic());
      }
      if (leaders.isEmpty()) {
        throw new IOException("topic " + record.topic() + " has no partitions");
      }
      int partition = Utils.toPositive(Utils.murmur2(record.key())) % leaders.size();
      RawKafka.Leader leader =
          leaders.stream().filter(l -> l.partition() == partition).findFirst().orElseThrow();
      long offset;
      try (RawKafka k = new RawKafka(leader.host(), leader.port())) {
        offset =
            k.produce(
                record.topic(),
                partition,
                record.key(),
                record.value(),
                record.headers().toArray());
      }
      RecordMetadata m =
          new RecordMetadata(
              new TopicPartition(record.topic(), partition),
              offset,
              0,
              System.currentTimeMillis(),
              record.key().length,
              record.value().length);
      done.complete(m);
      if (callback != null) {
        callback.onCompletion(m, null);
      }
    } catch (IOException | RuntimeException e) {
      done.completeExceptionally(e);
      if (callback != null) {
        callback.onCompletion(
            null,
            e instanceof RuntimeException re ? re : new org.apache.kafka.common.KafkaException(e));
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      done.completeExceptionally(e);
    }
    return done;
  }
}
