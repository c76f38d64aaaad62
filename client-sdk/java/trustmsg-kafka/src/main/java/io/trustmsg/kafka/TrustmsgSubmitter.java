package io.trustmsg.kafka;

import io.trustmsg.client.Message;
import io.trustmsg.client.MessageRules;
import io.trustmsg.client.TransactionalProducer;
import io.trustmsg.client.TrustmsgException;
import io.trustmsg.client.UnavailableException;
import io.trustmsg.client.WebhookSigner;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Kafka way in: prepare, commit and rollback as signed records to trustmsg's submit topic, on
 * an idempotent producer with {@code acks=all}. "Acknowledged" means durable in Kafka, not yet
 * applied: trustmsg applies it afterwards, check-back settles what never arrives, and records it
 * cannot apply go to {@code <submit topic>.dlq}.
 *
 * <pre>{@code
 * try (var submitter = TrustmsgSubmitter.builder(brokers, "shop", signingSecret).build()) {
 *   submitter.prepare(message);
 *   // … the local transaction …
 *   submitter.commit(message.messageKey());
 * }
 * }</pre>
 */
public final class TrustmsgSubmitter
    implements TransactionalProducer<RecordMetadata>, AutoCloseable {
  /** The settings the submitter owns. */
  private static final Set<String> OWN =
      Set.of(
          ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
          ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
          ProducerConfig.ACKS_CONFIG,
          ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG,
          ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG);

  private final Producer<byte[], byte[]> producer;
  private final String topic;
  private final String bizId;
  private final WebhookSigner signer;

  private TrustmsgSubmitter(Builder b) {
    Map<String, Object> config = new HashMap<>(b.config);
    config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, b.brokers);
    config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    config.put(ProducerConfig.ACKS_CONFIG, "all");
    config.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, "trustmsg-submitter-" + b.bizId);
    this.producer =
        new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
    this.topic = b.topic;
    this.bizId = b.bizId;
    this.signer = b.signer;
  }

  /**
   * A submitter on a producer made elsewhere (the tests' producer for the kit's broker). It must be
   * idempotent with {@code acks=all}; {@link #builder} makes one that is.
   */
  TrustmsgSubmitter(
      Producer<byte[], byte[]> producer, String topic, String bizId, String signingSecret) {
    this.producer = Objects.requireNonNull(producer, "producer");
    this.topic = Objects.requireNonNull(topic, "topic");
    this.bizId = Objects.requireNonNull(bizId, "bizId");
    this.signer = new WebhookSigner(signingSecret);
  }

  /**
   * @param brokers Kafka's bootstrap servers (the cluster trustmsg reads its submit topic on)
   * @param bizId the producer's registered id
   * @param signingSecret its registration's {@code signing_secret} ({@code whsec_…})
   */
  public static Builder builder(String brokers, String bizId, String signingSecret) {
    return new Builder(brokers, bizId, signingSecret);
  }

  @Override
  public String bizId() {
    return bizId;
  }

  /** The submit topic. */
  public String topic() {
    return topic;
  }

  /**
   * The prepare's record, signed. What trustmsg would dead-letter as invalid is refused here
   * ({@link io.trustmsg.client.InvalidRequestException} with the API's code), before anything is
   * sent.
   */
  public SubmitRecord prepareRecord(Message message) {
    MessageRules.check(message);
    Map<String, String> other = new TreeMap<>(message.headers());
    message
        .deliverAfter()
        .ifPresent(
            d -> other.put("trustmsg-deliver-after-ms", Long.toString(MessageRules.checkDelay(d))));
    message
        .deliverAt()
        .ifPresent(
            at ->
                other.put(
                    "trustmsg-deliver-at",
                    DateTimeFormatter.ISO_INSTANT.format(at.truncatedTo(ChronoUnit.MILLIS))));
    other.putAll(message.traceHeaders());
    return SubmitRecord.prepare(
        bizId,
        message.messageKey(),
        message.topic(),
        message.key().orElse(null),
        other,
        message.payload());
  }

  public CompletableFuture<RecordMetadata> prepareAsync(Message message) {
    return send(prepareRecord(message));
  }

  public CompletableFuture<RecordMetadata> commitAsync(String messageKey) {
    MessageRules.checkMessageKey(messageKey);
    return send(SubmitRecord.commit(bizId, messageKey));
  }

  public CompletableFuture<RecordMetadata> rollbackAsync(String messageKey) {
    MessageRules.checkMessageKey(messageKey);
    return send(SubmitRecord.rollback(bizId, messageKey));
  }

  /** Writes the prepare and waits for Kafka's acknowledgement. */
  @Override
  public RecordMetadata prepare(Message message) {
    return join(prepareAsync(message));
  }

  @Override
  public RecordMetadata commit(String messageKey) {
    return join(commitAsync(messageKey));
  }

  @Override
  public RecordMetadata rollback(String messageKey) {
    return join(rollbackAsync(messageKey));
  }

  private CompletableFuture<RecordMetadata> send(SubmitRecord r) {
    CompletableFuture<RecordMetadata> done = new CompletableFuture<>();
    producer.send(
        r.toRecord(topic, signer),
        (metadata, error) -> {
          if (error != null) {
            done.completeExceptionally(
                new UnavailableException(
                    1,
                    0,
                    null,
                    "Kafka did not acknowledge the "
                        + r.op()
                        + " of "
                        + r.messageKey()
                        + ": "
                        + error,
                    error));
          } else {
            done.complete(metadata);
          }
        });
    return done;
  }

  private static RecordMetadata join(CompletableFuture<RecordMetadata> f) {
    try {
      return f.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new UnavailableException(0, 0, null, "interrupted while waiting for Kafka", e);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof TrustmsgException t) {
        throw t;
      }
      throw new UnavailableException(1, 0, null, String.valueOf(e.getCause()), e.getCause());
    }
  }

  /** Sends what is buffered and closes the producer. */
  @Override
  public void close() {
    producer.close();
  }

  /** Builds a {@link TrustmsgSubmitter}. */
  public static final class Builder {
    private final String brokers;
    private final String bizId;
    private final WebhookSigner signer;
    private String topic = "trustmsg.submit";
    private final Map<String, Object> config = new HashMap<>();

    private Builder(String brokers, String bizId, String signingSecret) {
      this.brokers = Objects.requireNonNull(brokers, "brokers");
      if (brokers.isBlank()) {
        throw new IllegalArgumentException(
            "brokers is empty: give Kafka's bootstrap servers, host:port[,…]");
      }
      this.bizId = Objects.requireNonNull(bizId, "bizId");
      if (!bizId.matches("[A-Za-z0-9._-]{1,64}")) {
        throw new IllegalArgumentException(
            "bizId " + bizId + " is not 1 to 64 of A-Z a-z 0-9 . _ -");
      }
      this.signer = new WebhookSigner(Objects.requireNonNull(signingSecret, "signingSecret"));
    }

    /** The submit topic ({@code trustmsg.submit} unless set, as {@code trustmsg dev} has it). */
    public Builder topic(String topic) {
      MessageRules.checkTopic(topic);
      this.topic = topic;
      return this;
    }

    /**
     * A kafka-clients producer setting (TLS, SASL, timeouts…). The brokers, {@code
     * enable.idempotence=true} and {@code acks=all} are the submitter's own and refused here.
     */
    public Builder config(String name, Object value) {
      if (OWN.contains(name)) {
        throw new IllegalArgumentException(
            "Kafka setting "
                + name
                + " is the submitter's own (brokers, enable.idempotence=true, acks=all, byte serializers)");
      }
      config.put(name, value);
      return this;
    }

    public TrustmsgSubmitter build() {
      return new TrustmsgSubmitter(this);
    }
  }
}
