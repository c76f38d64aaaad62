package io.trustmsg.client;

/**
 * What the transaction helper needs of a producer: prepare, commit and rollback of one message.
 * {@link TrustmsgClient} (HTTP) implements it, and so does the Kafka way in's {@code
 * io.trustmsg.kafka.TrustmsgSubmitter}.
 *
 * @param <R> what each call returns (a {@link MessageView} over HTTP)
 */
public interface TransactionalProducer<R> {
  String bizId();

  R prepare(Message message);

  R commit(String messageKey);

  R rollback(String messageKey);
}
