package io.trustmsg.client;

import java.util.Objects;
import java.util.function.Consumer;
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
   *   <li>trustmsg already decided the message, {@code local} never runs: prepare refused ({@code
   *       409 already_rolled_back} or {@code rolled_back}) or answered {@code ROLLED_BACK}: {@link
   *       AlreadyRolledBackException}; answered {@code COMMITTED} (a retry of a request that went
   *       through): {@link AlreadyCommittedException}; any other status but {@code PREPARED} (e.g.
   *       {@code VERIFY_FAILED}): {@link NotPreparedException}. (The Kafka way in answers no
   *       status: there {@code local} always runs.)
   *   <li>{@code local} throws: the message is rolled back and {@code local}'s own exception is
   *       rethrown, unchanged; a rollback that could not be delivered is attached to it as
   *       suppressed (check-back will roll the message back). A rollback trustmsg refuses is {@link
   *       RollbackRejectedException}, {@code local}'s exception its cause.
   *   <li>{@code local} returns and the commit cannot be delivered (trustmsg unavailable): its
   *       value is returned all the same, and check-back commits the message.
   *   <li>{@code local} returns and trustmsg refuses the commit: {@link CommitRejectedException},
   *       carrying the value.
   *   <li>{@code local} throws the barrier's {@link AlreadyDecidedException} (the key's marker was
   *       there: an earlier attempt's, or a check-back's): what the marker says is sent at once,
   *       commit then {@link AlreadyCommittedException}, or rollback then {@link
   *       AlreadyRolledBackException}.
   * </ul>
   */
  public static <R, T, X extends Exception> T run(
      TransactionalProducer<R> producer, Message message, LocalTransaction<R, T, X> local)
      throws X {
    return run(producer, message, local, e -> false, null);
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
    return run(producer, message, local, leaveToCheckBack, null);
  }

  /**
   * As {@link #run(TransactionalProducer, Message, LocalTransaction, Predicate)}, with a test hook:
   * {@code afterLocalCommit} (when not null) is called with the message right after {@code local}
   * returned (its transaction committed) and before the commit is sent. If it throws, no decision
   * is sent and its exception is rethrown as it is: what a process that dies at that moment leaves
   * behind (check-back, or the client's retry, will decide).
   */
  public static <R, T, X extends Exception> T run(
      TransactionalProducer<R> producer,
      Message message,
      LocalTransaction<R, T, X> local,
      Predicate<Exception> leaveToCheckBack,
      Consumer<Message> afterLocalCommit)
      throws X {
    Objects.requireNonNull(producer, "producer");
    Objects.requireNonNull(message, "message");
    Objects.requireNonNull(local, "local");
    Objects.requireNonNull(leaveToCheckBack, "leaveToCheckBack");
    String key = message.messageKey();
    R prepared = prepare(producer, message);
    T value;
    try {
      value = local.run(prepared);
    } catch (AlreadyDecidedException e) {
      throw sendWhatTheBarrierSays(producer, key, prepared, e);
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
    if (afterLocalCommit != null) {
      afterLocalCommit.accept(message);
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

  /** Prepares, and refuses to go on unless trustmsg answered PREPARED (or no status at all). */
  private static <R> R prepare(TransactionalProducer<R> producer, Message message) {
    String key = message.messageKey();
    R prepared;
    try {
      prepared = producer.prepare(message);
    } catch (ConflictException e) {
      String code = e.code().orElse("");
      if (code.equals("already_rolled_back") || code.equals("rolled_back")) {
        throw new AlreadyRolledBackException(key, null, "prepare refused: " + code, e);
      }
      throw e;
    }
    if (prepared instanceof MessageView view && !"PREPARED".equals(view.status())) {
      switch (view.status()) {
        case "COMMITTED" ->
            throw new AlreadyCommittedException(key, view, "prepare answered COMMITTED");
        case "ROLLED_BACK" ->
            throw new AlreadyRolledBackException(key, view, "prepare answered ROLLED_BACK", null);
        default ->
            throw new NotPreparedException(
                "not_prepared",
                key,
                view.status(),
                view,
                "prepare of " + key + " answered status " + view.status() + "; no local work ran",
                null);
      }
    }
    return prepared;
  }

  /**
   * The barrier already held a marker for the key (an earlier attempt's, or a check-back's): the
   * local work did not run. Sends the decision the marker records, at once.
   */
  private static <R> NotPreparedException sendWhatTheBarrierSays(
      TransactionalProducer<R> producer, String key, R prepared, AlreadyDecidedException marker) {
    if (marker.decision() == Decision.COMMIT) {
      try {
        R answer = producer.commit(key);
        return new AlreadyCommittedException(
            key,
            answer instanceof MessageView v ? v : null,
            "the barrier holds its commit marker; commit sent",
            marker);
      } catch (TrustmsgException e) {
        if (e.isUnavailable()) {
          log.warn(
              "commit of {} (its local transaction committed before) not delivered ({}); "
                  + "check-back will commit it",
              key,
              e.getMessage());
          AlreadyCommittedException placed =
              new AlreadyCommittedException(
                  key, null, "the barrier holds its commit marker; check-back will commit", marker);
          placed.addSuppressed(e);
          return placed;
        }
        log.error(
            "the barrier of {} holds its commit marker but trustmsg refused the commit", key, e);
        throw new CommitRejectedException(key, null, e);
      }
    }
    MessageView view = prepared instanceof MessageView v ? v : null;
    try {
      R answer = producer.rollback(key);
      view = answer instanceof MessageView v ? v : view;
    } catch (TrustmsgException e) {
      if (!e.isUnavailable()) {
        log.error(
            "the barrier of {} holds its rollback marker but trustmsg refused the rollback",
            key,
            e);
        throw new RollbackRejectedException(key, marker, e);
      }
      log.warn(
          "rollback of {} not delivered ({}); check-back will roll it back", key, e.getMessage());
      marker.addSuppressed(e);
    }
    return new AlreadyRolledBackException(
        key, view, "the barrier holds its rollback marker; rollback sent", marker);
  }

  private static void rollback(TransactionalProducer<?> producer, String key, Throwable failure) {
    try {
      producer.rollback(key);
    } catch (TrustmsgException e) {
      if (e.isUnavailable()) {
        log.warn(
            "rollback of {} not delivered ({}); check-back will roll it back", key, e.getMessage());
        failure.addSuppressed(e);
      } else {
        log.error("local transaction of {} failed and trustmsg refused the rollback", key, e);
        throw new RollbackRejectedException(key, failure, e);
      }
    }
  }
}
