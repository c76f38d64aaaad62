package io.trustmsg.client;

import java.util.Objects;
import java.util.function.Consumer;

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
 * <p>What can happen is {@link Transactions#run}'s: no local work unless prepare answered {@code
 * PREPARED} ({@link AlreadyCommittedException}, {@link AlreadyRolledBackException}, {@link
 * NotPreparedException}), a refused commit or rollback is an exception. Plus the barrier's: when it
 * already holds the key's marker (an earlier attempt committed locally and died before its
 * decision, or a check-back rolled the message back), the work does not run and the helper sends
 * what the marker says: commit, then {@link AlreadyCommittedException}; rollback, then {@link
 * AlreadyRolledBackException}. A local COMMIT whose outcome is unknown is settled by reading the
 * barrier on a fresh connection; only when that fails too ({@link OutcomeUnknownException}) is it
 * left to check-back. Spring applications use the starter's template, which joins Spring's
 * transaction.
 */
public final class TrustmsgTransactionTemplate {
  private final TransactionalProducer<?> producer;
  private final Barrier barrier;
  private final Consumer<Message> afterLocalCommit;

  public TrustmsgTransactionTemplate(TransactionalProducer<?> producer, Barrier barrier) {
    this(producer, barrier, null);
  }

  private TrustmsgTransactionTemplate(
      TransactionalProducer<?> producer, Barrier barrier, Consumer<Message> afterLocalCommit) {
    this.producer = Objects.requireNonNull(producer, "producer");
    this.barrier = Objects.requireNonNull(barrier, "barrier");
    this.afterLocalCommit = afterLocalCommit;
  }

  /**
   * A template that calls {@code hook} right after the local COMMIT and before the commit is sent
   * to trustmsg: the crash point, for your own tests. If the hook throws, no decision is sent and
   * {@link #execute} throws the hook's exception (the local rows are committed; check-back, or a
   * retry of the same message, commits the message). {@code Runtime.getRuntime().halt(137)} in the
   * hook is a process dying hard at that moment.
   */
  public TrustmsgTransactionTemplate afterLocalCommit(Consumer<Message> hook) {
    return new TrustmsgTransactionTemplate(producer, barrier, hook);
  }

  /**
   * Publishes {@code message} if and only if {@code work}'s transaction commits.
   *
   * @return what {@code work} returned
   * @throws X what {@code work} threw, unchanged (the transaction rolled back, the message too)
   * @throws AlreadyCommittedException the message was committed before: {@code work} did not run
   * @throws AlreadyRolledBackException the message was rolled back before: {@code work} did not run
   * @throws NotPreparedException prepare answered another status: {@code work} did not run
   * @throws CommitRejectedException {@code work} committed but trustmsg refused the commit
   * @throws RollbackRejectedException {@code work} failed but trustmsg refused the rollback
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
        prepared -> {
          try {
            return barrier.runInTransaction(bizId, key, work);
          } catch (AlreadyDecidedException | OutcomeUnknownException e) {
            throw e;
          } catch (Exception | Error e) {
            AlreadyDecidedException placedMeanwhile = settleRolledBack(barrier, bizId, key, e);
            if (placedMeanwhile != null) {
              throw placedMeanwhile;
            }
            throw e;
          }
        },
        TrustmsgTransactionTemplate::leaveToCheckBack,
        afterLocalCommit);
  }

  /**
   * The local transaction of {@code key} rolled back with {@code failure}: before the rollback is
   * sent, the barrier records it (a rollback marker, as a check-back would), unless another request
   * of the same key committed its marker meanwhile (it waited on ours): then that one placed the
   * message, and this one must not roll it back.
   *
   * @return null to throw {@code failure} and send the rollback (a barrier that cannot be read is
   *     attached to {@code failure}, suppressed); or an {@link AlreadyDecidedException} ({@link
   *     Decision#COMMIT}, {@code failure} suppressed in it), which the helper answers with the
   *     commit and {@link AlreadyCommittedException}
   */
  public static AlreadyDecidedException settleRolledBack(
      Barrier barrier, String bizId, String key, Throwable failure) {
    Decision d;
    try {
      d = barrier.check(bizId, key);
    } catch (java.sql.SQLException | RuntimeException checkError) {
      failure.addSuppressed(checkError);
      return null;
    }
    if (d != Decision.COMMIT) {
      return null;
    }
    AlreadyDecidedException other = new AlreadyDecidedException(bizId, key, Decision.COMMIT);
    other.addSuppressed(failure);
    return other;
  }

  /** Failures after which no rollback is sent: check-back reads the barrier instead. */
  public static boolean leaveToCheckBack(Exception e) {
    return e instanceof OutcomeUnknownException
        || (e instanceof AlreadyDecidedException a && a.decision() == Decision.COMMIT);
  }
}
