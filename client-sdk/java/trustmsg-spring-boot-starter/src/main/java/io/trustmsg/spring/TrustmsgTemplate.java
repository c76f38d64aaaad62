package io.trustmsg.spring;

import io.trustmsg.client.AlreadyDecidedException;
import io.trustmsg.client.Barrier;
import io.trustmsg.client.BarrierException;
import io.trustmsg.client.Decision;
import io.trustmsg.client.Message;
import io.trustmsg.client.OutcomeUnknownException;
import io.trustmsg.client.TransactionalProducer;
import io.trustmsg.client.Transactions;
import io.trustmsg.client.TrustmsgTransactionTemplate;
import java.sql.SQLException;
import java.util.Objects;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.transaction.IllegalTransactionStateException;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.transaction.support.TransactionCallback;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Publishes a message if and only if a Spring-managed transaction commits: prepare, then one
 * transaction of Spring's {@link PlatformTransactionManager} in which the barrier marker is
 * inserted on the transaction's own connection (so it commits with everything your {@code
 * JdbcTemplate}, JPA or jOOQ code writes there), then commit; roll back if the callback throws.
 *
 * <pre>{@code
 * Order order = trustmsg.execute(message, status -> {
 *   jdbc.update("INSERT INTO orders (id, total) VALUES (?, ?)", id, total);
 *   return new Order(id, total);
 * });
 * }</pre>
 *
 * <p>The callback's own exception is rethrown unchanged (the transaction and the message rolled
 * back). The callback never runs for a message trustmsg already decided: {@code
 * AlreadyCommittedException} (prepare answered COMMITTED, or the barrier held the commit marker of
 * an earlier attempt: the helper sent the commit), {@code AlreadyRolledBackException}, {@code
 * NotPreparedException}; a refused commit or rollback is {@code CommitRejectedException} or {@code
 * RollbackRejectedException}, as {@link Transactions#run} says. The transaction must be on the
 * barrier's {@link DataSource}.
 */
public class TrustmsgTemplate {
  private final TransactionalProducer<?> producer;
  private final DataSource dataSource;
  private final TransactionTemplate transactions;
  private final Barrier barrier;
  private final Consumer<Message> afterLocalCommit;
  private final java.util.EnumMap<Outcome, java.util.concurrent.atomic.LongAdder> outcomes;

  /** How a call of {@link #execute} ended, as the metrics count it. */
  public enum Outcome {
    /** The work committed and the message is committed (or left to check-back to commit). */
    COMMITTED,
    /** trustmsg or the barrier had the message committed already: the work did not run. */
    ALREADY_COMMITTED,
    /** trustmsg or the barrier had the message rolled back already: the work did not run. */
    ALREADY_ROLLED_BACK,
    /** Anything else was thrown: the work failed (rolled back), or trustmsg or the database did. */
    FAILED
  }

  public TrustmsgTemplate(
      TransactionalProducer<?> producer,
      PlatformTransactionManager transactionManager,
      DataSource dataSource) {
    this.producer = Objects.requireNonNull(producer, "producer");
    this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
    this.transactions =
        new TransactionTemplate(Objects.requireNonNull(transactionManager, "transactionManager"));
    this.barrier = new Barrier(dataSource);
    this.afterLocalCommit = null;
    this.outcomes = new java.util.EnumMap<>(Outcome.class);
    for (Outcome o : Outcome.values()) {
      outcomes.put(o, new java.util.concurrent.atomic.LongAdder());
    }
  }

  private TrustmsgTemplate(TrustmsgTemplate t, Consumer<Message> afterLocalCommit) {
    this.producer = t.producer;
    this.dataSource = t.dataSource;
    this.transactions = t.transactions;
    this.barrier = t.barrier;
    this.afterLocalCommit = afterLocalCommit;
    this.outcomes = t.outcomes;
  }

  /** How many calls of {@link #execute} (of this template and its copies) ended in {@code o}. */
  public long count(Outcome o) {
    return outcomes.get(o).sum();
  }

  /**
   * A template that calls {@code hook} right after the transaction's COMMIT and before the commit
   * is sent to trustmsg: the crash point, for your own tests. If the hook throws, no decision is
   * sent and {@link #execute} throws the hook's exception (check-back, or a retry of the same
   * message, commits the message).
   */
  public TrustmsgTemplate afterLocalCommit(Consumer<Message> hook) {
    return new TrustmsgTemplate(this, hook);
  }

  /**
   * Runs {@code work} in a new transaction with the barrier marker, between prepare and commit.
   *
   * @throws IllegalTransactionStateException called inside a transaction already open (a
   *     {@code @Transactional} method): the template's transaction would join it, and the message
   *     would be committed before your transaction is. Call it from outside, and put the work of
   *     the transaction in {@code work}.
   */
  public <T> T execute(Message message, TransactionCallback<T> work) {
    Objects.requireNonNull(work, "work");
    if (TransactionSynchronizationManager.isActualTransactionActive()) {
      throw new IllegalTransactionStateException(
          "TrustmsgTemplate.execute was called inside an open transaction: its message would be"
              + " committed before that transaction is; call it outside @Transactional methods and"
              + " do the transaction's work in its callback");
    }
    Outcome outcome = Outcome.FAILED;
    try {
      T value = run(producer, message, work);
      outcome = Outcome.COMMITTED;
      return value;
    } catch (io.trustmsg.client.AlreadyCommittedException e) {
      outcome = Outcome.ALREADY_COMMITTED;
      throw e;
    } catch (io.trustmsg.client.AlreadyRolledBackException e) {
      outcome = Outcome.ALREADY_ROLLED_BACK;
      throw e;
    } catch (AlreadyDecidedException e) {
      outcome =
          e.decision() == Decision.COMMIT ? Outcome.ALREADY_COMMITTED : Outcome.ALREADY_ROLLED_BACK;
      throw e;
    } finally {
      outcomes.get(outcome).increment();
    }
  }

  private <R, T> T run(TransactionalProducer<R> p, Message message, TransactionCallback<T> work) {
    String bizId = p.bizId();
    String key = message.messageKey();
    return Transactions.run(
        p,
        message,
        prepared -> {
          try {
            return inTransaction(bizId, key, work);
          } catch (AlreadyDecidedException | OutcomeUnknownException e) {
            throw e;
          } catch (RuntimeException | Error e) {
            // Rolled back: the barrier records it before the rollback is sent, unless a request of
            // the same key committed meanwhile (then that one placed the message).
            AlreadyDecidedException placedMeanwhile =
                TrustmsgTransactionTemplate.settleRolledBack(barrier, bizId, key, e);
            if (placedMeanwhile != null) {
              throw placedMeanwhile;
            }
            throw e;
          }
        },
        TrustmsgTransactionTemplate::leaveToCheckBack,
        afterLocalCommit);
  }

  /** One transaction of Spring's: the marker, then {@code work}; its value once committed. */
  private <T> T inTransaction(String bizId, String key, TransactionCallback<T> work) {
    boolean[] workDone = {false};
    java.util.List<T> result = new java.util.ArrayList<>(1);
    T value;
    try {
      value =
          transactions.execute(
              status -> {
                try {
                  Barrier.insert(DataSourceUtils.getConnection(dataSource), bizId, key);
                } catch (SQLException e) {
                  throw new BarrierException("inserting the barrier marker of " + key, e);
                }
                T v = work.doInTransaction(status);
                workDone[0] = !status.isRollbackOnly();
                result.add(v);
                return v;
              });
    } catch (TransactionException e) {
      if (!workDone[0]) {
        throw e;
      }
      afterFailedCommit(bizId, key, e);
      return result.get(0);
    }
    if (!workDone[0]) {
      // The callback returned but marked the transaction rollback-only: Spring rolled it back
      // without a word, so the message must be rolled back too.
      throw new UnexpectedRollbackException(
          "the callback of "
              + key
              + " set the transaction rollback-only: it was rolled back, and so is the message");
    }
    return value;
  }

  /** The COMMIT failed after the work: committed or not, the barrier says. */
  private void afterFailedCommit(String bizId, String key, TransactionException commitError) {
    Decision d;
    try {
      d = barrier.check(bizId, key);
    } catch (SQLException checkError) {
      commitError.addSuppressed(checkError);
      throw new OutcomeUnknownException(
          "the local COMMIT of "
              + key
              + " failed and the barrier could not be read; check-back will decide",
          commitError);
    }
    if (d != Decision.COMMIT) {
      throw commitError;
    }
  }
}
