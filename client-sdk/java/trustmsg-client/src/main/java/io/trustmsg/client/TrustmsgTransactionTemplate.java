package io.trustmsg.client;

import java.util.Objects;

/**
 * The transaction helper with the barrier, on plain JDBC: prepare, then one local transaction
 * holding the barrier marker and your work, then commit; roll back if the work throws.
 *
 * <pre>{@code
 * var template = new TrustmsgTransactionTemplate(trustmsg, new Barrier(dataSource));
 * long orderId = template.execute(message, conn -> {
 *   try (var st = conn.prepareStatement("INSERT INTO orders (…) VALUES (?, ?)")) { … }
 *   return id;
 * });
 * }</pre>
 *
 * <p>What can happen is {@link Transactions#run}'s, plus: a local COMMIT whose outcome is unknown
 * ({@link OutcomeUnknownException}) or a key the barrier already committed ({@link
 * AlreadyDecidedException} with {@link Decision#COMMIT}) sends no rollback; check-back reads the
 * barrier. Spring applications use the starter's template, which joins Spring's transaction.
 */
public final class TrustmsgTransactionTemplate {
  private final TransactionalProducer<?> producer;
  private final Barrier barrier;

  public TrustmsgTransactionTemplate(TransactionalProducer<?> producer, Barrier barrier) {
    this.producer = Objects.requireNonNull(producer, "producer");
    this.barrier = Objects.requireNonNull(barrier, "barrier");
  }

  /**
   * Publishes {@code message} if and only if {@code work}'s transaction commits.
   *
   * @return what {@code work} returned
   * @throws X what {@code work} threw, unchanged (the transaction rolled back, the message too)
   */
  public <T, X extends Exception> T execute(Message message, JdbcWork<T, X> work) throws X {
    Objects.requireNonNull(work, "work");
    return run(producer, message, work);
  }

  private <R, T, X extends Exception> T run(
      TransactionalProducer<R> p, Message message, JdbcWork<T, X> work) throws X {
    String bizId = p.bizId();
    String key = message.messageKey();
    return Transactions.run(
        p,
        message,
        prepared -> barrier.runInTransaction(bizId, key, work),
        TrustmsgTransactionTemplate::leaveToCheckBack);
  }

  /** Failures after which no rollback is sent: check-back reads the barrier instead. */
  public static boolean leaveToCheckBack(Exception e) {
    return e instanceof OutcomeUnknownException
        || (e instanceof AlreadyDecidedException a && a.decision() == Decision.COMMIT);
  }
}
