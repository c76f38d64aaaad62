package io.trustmsg.client;

import java.util.Objects;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The two-phase message without a database of the SDK's: prepare, run the local transaction, then
 * commit if it returned or roll back if it threw. Use {@link TrustmsgTransactionTemplate} (or the
 * Spring starter's template) to have the barrier marker written in the local transaction, which is
 * what lets check-back answer exactly.
 */
public final class Transactions {
  private static final Logger log = LoggerFactory.getLogger(Transactions.class);

  private Transactions() {}

  /**
   * Prepares {@code message}, runs {@code local}, then commits (it returned) or rolls back (it
   * threw).
   *
   * <ul>
   *   <li>The prepare fails: its {@link TrustmsgException} is thrown, {@code local} never runs.
   *   <li>{@code local} throws: the message is rolled back and {@code local}'s own exception is
   *       rethrown, unchanged; a rollback that could not be delivered is attached to it as
   *       suppressed (check-back will roll the message back).
   *   <li>{@code local} returns and the commit cannot be delivered (trustmsg unavailable): its
   *       value is returned all the same, and check-back commits the message.
   *   <li>{@code local} returns and trustmsg refuses the commit: {@link CommitRejectedException}.
   * </ul>
   */
  public static <R, T, X extends Exception> T run(
      TransactionalProducer<R> producer, Message message, LocalTransaction<R, T, X> local)
      throws X {
    return run(producer, message, local, e -> false);
  }

  /**
   * As {@link #run(TransactionalProducer, Message, LocalTransaction)}, but a failure for which
   * {@code leaveToCheckBack} is true sends no rollback: the local outcome is not known, and
   * check-back will ask the database.
   */
  public static <R, T, X extends Exception> T run(
      TransactionalProducer<R> producer,
      Message message,
      LocalTransaction<R, T, X> local,
      Predicate<Exception> leaveToCheckBack)
      throws X {
    Objects.requireNonNull(producer, "producer");
    Objects.requireNonNull(message, "message");
    Objects.requireNonNull(local, "local");
    String key = message.messageKey();
    R prepared = producer.prepare(message);
    T value;
    try {
      value = local.run(prepared);
    } catch (Exception e) {
      if (leaveToCheckBack.test(e)) {
        log.warn("local transaction of {} has an unknown outcome; check-back will decide", key, e);
        throw e;
      }
      rollback(producer, key, e);
      throw e;
    } catch (Error e) {
      rollback(producer, key, e);
      throw e;
    }
    try {
      producer.commit(key);
    } catch (TrustmsgException e) {
      if (e.isUnavailable()) {
        log.warn("commit of {} not delivered ({}); check-back will commit it", key, e.getMessage());
      } else {
        log.error("local transaction of {} committed but trustmsg refused the commit", key, e);
        throw new CommitRejectedException(key, value, e);
      }
    }
    return value;
  }

  private static void rollback(TransactionalProducer<?> producer, String key, Throwable failure) {
    try {
      producer.rollback(key);
    } catch (TrustmsgException e) {
      if (e.isUnavailable()) {
        log.warn(
            "rollback of {} not delivered ({}); check-back will roll it back", key, e.getMessage());
      } else {
        log.error("local transaction of {} failed and trustmsg refused the rollback", key, e);
      }
      failure.addSuppressed(e);
    }
  }
}
