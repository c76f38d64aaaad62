/**
 * The transaction helper: prepare → local transaction → commit or rollback.
 *
 * The order matters. The message is prepared *before* the local transaction,
 * so a crash at any later point leaves a PREPARED message that check-back
 * resolves; a crash before prepare leaves nothing to resolve.
 *
 * The local work runs only for a message that prepare answered PREPARED. A
 * message already decided — a client's retry of an order that went through,
 * or that was refused — is reported with a typed error and its work does not
 * run again: {@link AlreadyCommittedError} (answer "already placed"),
 * {@link AlreadyRolledBackError} (answer "refused"), {@link NotPreparedError}
 * (VERIFY_FAILED: an operator decides). What the barrier knows is sent at
 * once: its `commit` marker (an earlier run committed locally, then stopped)
 * makes the helper send the commit, its `rollback` marker the rollback (a
 * message trustmsg reports rolled back has its rollback repeated: harmless).
 *
 * When the local work fails, the message is rolled back and **the work's own
 * error is rethrown** (the same value, never swallowed, never replaced): the
 * message is never committed then. (The barrier's helper first asks the
 * barrier as check-back would, leaving its `rollback` marker; if an identical
 * request committed first, the barrier answers commit and the helper sends
 * that commit and throws {@link AlreadyCommittedError}: see `transaction` in
 * `sql/core.ts`.) When the local transaction committed, the
 * commit is sent; if trustmsg cannot be reached the result says so (check-back
 * will ask, and the barrier answers commit); if trustmsg refuses it, the
 * helper throws {@link CommitRejectedError}: local state and message disagree.
 */
import {
  AlreadyCommittedError,
  AlreadyDecidedError,
  AlreadyRolledBackError,
  CommitRejectedError,
  isUnavailable,
  NotPreparedError,
  OutcomeUnknownError,
  RollbackRejectedError,
  UserAbortError,
  type TrustmsgError,
} from './errors.js';
import { toLogger, type AnyLogger } from './logger.js';
import type { CallOptions, Message } from './types.js';
import { isView } from './view.js';

/**
 * A way in to trustmsg: the HTTP {@link Producer} (a receipt is the message's
 * view: trustmsg applied the call) or the Kafka `Submitter` (a receipt is the
 * record's place in the submit topic: Kafka stored it, trustmsg will apply it).
 */
export interface WayIn<R> {
  readonly bizId: string;
  /** Where the helper reports a decision it could not deliver (else one JSON line on stderr). */
  readonly logger?: AnyLogger | undefined;
  prepare(message: Message, options?: CallOptions): Promise<R>;
  commit(messageKey: string, options?: CallOptions): Promise<R>;
  rollback(messageKey: string, options?: CallOptions): Promise<R>;
}

/** What became of the message once the local transaction committed. */
export type TransactionResult<T, R> =
  /** The local transaction committed and so did the message. */
  | { status: 'committed'; value: T; prepared: R; receipt: R }
  /**
   * The local transaction committed but the commit could not be delivered
   * (trustmsg unreachable after the retries, or the call was aborted). The
   * message stays PREPARED until check-back asks; the barrier answers commit.
   * The order is placed.
   */
  | { status: 'commit_left_to_check_back'; value: T; prepared: R; error: TrustmsgError };

/** Options of the transaction helpers. */
export interface TransactionOptions extends CallOptions {
  /** Where a decision that could not be delivered is reported (default: the way in's `logger`). */
  logger?: AnyLogger | undefined;
  /**
   * A test hook at the crash point: called right after the local COMMIT and
   * before the decision is sent. If it throws (or rejects), the helper sends
   * **no** decision and rethrows its error, as if the process had stopped
   * there: check-back, or the client's retry, decides. For your own tests of
   * a crash after the local commit; leave it out in production.
   */
  afterLocalCommit?: (() => void | Promise<void>) | undefined;
}

/**
 * Prepares `message` through `way`, runs `local` with prepare's receipt,
 * then commits the message (`local` resolved) or rolls it back (`local`
 * threw) and rethrows `local`'s error.
 *
 * Throws prepare's error when prepare fails (then `local` never ran; if it
 * was an {@link UnavailableError} the message may have been stored, and its
 * check-back must answer rollback, which the barrier does), and without
 * running `local` when prepare's answer is not PREPARED:
 * {@link AlreadyCommittedError}, {@link AlreadyRolledBackError} (also
 * trustmsg's own 409 `already_rolled_back` / `rolled_back`),
 * {@link NotPreparedError}. (A `Submitter`'s prepare is acknowledged by Kafka,
 * not answered by trustmsg: only the barrier can tell then.)
 *
 * `local` must throw only when its transaction did **not** commit. The
 * barrier's helpers throw {@link AlreadyDecidedError} when the barrier holds
 * a marker (the helper then sends that decision and throws
 * {@link AlreadyCommittedError} or {@link AlreadyRolledBackError}; a
 * `commit` one also when the work failed but an identical request committed
 * first), and
 * {@link OutcomeUnknownError} when COMMIT's outcome is unknown and the barrier
 * could not be read either: then no decision is sent and check-back decides.
 */
export async function runTransaction<T, R>(
  way: WayIn<R>,
  message: Message,
  local: (prepared: R) => Promise<T>,
  options: TransactionOptions = {},
): Promise<TransactionResult<T, R>> {
  if (typeof local !== 'function') throw new TypeError('local must be a function: async (prepared) => { … }');
  const logger = toLogger(options.logger ?? way.logger);
  const call = { signal: options.signal };
  const key = message.message_key;
  const fields = (error: unknown): Record<string, unknown> => ({ bizId: way.bizId, messageKey: key, error: String(error) });

  /** Sends the rollback of a message whose local work did not commit; `workError` is why. */
  const rollback = async (workError: unknown): Promise<void> => {
    try {
      await way.rollback(key, call);
    } catch (e) {
      if (!isUnavailable(e) && !(e instanceof UserAbortError)) throw new RollbackRejectedError(key, workError, e);
      logger.warn(fields(e), 'rollback not delivered; check-back will roll back');
    }
  };

  /** Repeats the rollback of a message trustmsg reported rolled back (idempotent: harmless, and every SDK's helper does it). */
  const rollbackAgain = async (): Promise<void> => {
    try {
      await way.rollback(key, call);
    } catch (e) {
      logger.warn(fields(e), 'rollback of a rolled-back message not repeated');
    }
  };

  let prepared: R;
  try {
    prepared = await way.prepare(message, call);
  } catch (e) {
    if (e instanceof AlreadyRolledBackError) await rollbackAgain();
    throw e;
  }
  if (isView(prepared) && prepared.status !== 'PREPARED') {
    if (prepared.status === 'COMMITTED') throw new AlreadyCommittedError(key, prepared);
    if (prepared.status === 'ROLLED_BACK') {
      // An older trustmsg answers a prepare of a rolled-back message 200 ROLLED_BACK, not 409.
      await rollbackAgain();
      throw new AlreadyRolledBackError(409, 'already_rolled_back', `message ${JSON.stringify(key)} is rolled back`);
    }
    throw new NotPreparedError(key, prepared.status, prepared);
  }

  let value: T;
  try {
    value = await local(prepared);
  } catch (error) {
    if (error instanceof OutcomeUnknownError) {
      logger.warn(fields(error), 'no decision sent; check-back will decide');
      throw error;
    }
    if (error instanceof AlreadyDecidedError && error.decision === 'commit') {
      // An earlier run of this key committed locally and stopped before its commit: send it now.
      let receipt: R;
      try {
        receipt = await way.commit(key, call);
      } catch (e) {
        if (!isUnavailable(e) && !(e instanceof UserAbortError)) throw new CommitRejectedError(key, undefined, e);
        logger.warn(fields(e), 'commit not delivered; check-back will commit');
        throw new AlreadyCommittedError(key, undefined, e);
      }
      throw new AlreadyCommittedError(key, receipt);
    }
    await rollback(error);
    if (error instanceof AlreadyDecidedError) {
      throw new AlreadyRolledBackError(
        409,
        'already_rolled_back',
        `the barrier holds the rollback marker of ${JSON.stringify(key)}: the message is rolled back`,
      );
    }
    throw error;
  }

  if (options.afterLocalCommit) {
    try {
      await options.afterLocalCommit();
    } catch (e) {
      logger.warn(fields(e), 'afterLocalCommit threw: no decision sent; check-back or a retry will decide');
      throw e;
    }
  }

  try {
    return { status: 'committed', value, prepared, receipt: await way.commit(key, call) };
  } catch (e) {
    if (isUnavailable(e) || e instanceof UserAbortError) {
      logger.warn(fields(e), 'commit not delivered; check-back will commit');
      return { status: 'commit_left_to_check_back', value, prepared, error: e };
    }
    throw new CommitRejectedError(key, value, e);
  }
}
