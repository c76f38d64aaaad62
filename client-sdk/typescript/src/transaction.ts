/**
 * The transaction helper: prepare → local transaction → commit or rollback.
 *
 * The order matters. The message is prepared *before* the local transaction,
 * so a crash at any later point leaves a PREPARED message that check-back
 * resolves; a crash before prepare leaves nothing to resolve.
 *
 * When the local work fails, the message is rolled back and **the work's own
 * error is rethrown** (the same value, never swallowed, never replaced): the
 * message is never committed then. When the local transaction committed, the
 * commit is sent, and if it cannot be delivered the helper says so in its
 * result instead of throwing, which would hide that the local change was made:
 * check-back will ask, and the barrier answers commit.
 */
import { AlreadyDecidedError, OutcomeUnknownError, isUnavailable, UserAbortError, type TrustmsgError } from './errors.js';
import type { CallOptions, Logger, Message } from './types.js';

/**
 * A way in to trustmsg: the HTTP {@link Producer} (a receipt is the message's
 * view: trustmsg applied the call) or the Kafka `Submitter` (a receipt is the
 * record's place in the submit topic: Kafka stored it, trustmsg will apply it).
 */
export interface WayIn<R> {
  readonly bizId: string;
  /** Where the helper reports a decision it could not deliver (else `console`). */
  readonly logger?: Logger;
  prepare(message: Message, options?: CallOptions): Promise<R>;
  commit(messageKey: string, options?: CallOptions): Promise<R>;
  rollback(messageKey: string, options?: CallOptions): Promise<R>;
}

/** What became of the message once the local transaction committed. */
export type TransactionResult<T, R> =
  /** The local transaction committed and so did the message. */
  | { status: 'committed'; value: T; receipt: R }
  /**
   * The local transaction committed but the commit could not be delivered
   * (trustmsg unreachable after the retries, or the call was aborted). The
   * message stays PREPARED until check-back asks; the barrier answers commit.
   */
  | { status: 'commit_left_to_check_back'; value: T; error: TrustmsgError }
  /**
   * The local transaction committed but trustmsg refused the commit (e.g.
   * `already_rolled_back`: an operator decided). Local state and message
   * disagree: alert someone.
   */
  | { status: 'commit_rejected'; value: T; error: TrustmsgError };

/** Options of the transaction helpers. */
export interface TransactionOptions extends CallOptions {
  /** Where a decision that could not be delivered or was refused is reported (default: the way in's `logger`). */
  logger?: Logger;
}

/** Errors after which no decision may be sent: only check-back can tell. */
function leaveToCheckBack(e: unknown): boolean {
  return e instanceof OutcomeUnknownError || (e instanceof AlreadyDecidedError && e.decision === 'commit');
}

/**
 * Prepares `message` through `way`, runs `local` with prepare's receipt,
 * then commits the message (`local` resolved) or rolls it back (`local`
 * threw) and rethrows `local`'s error.
 *
 * Throws prepare's error when prepare fails (then `local` never ran; if it
 * was an {@link UnavailableError} the message may have been stored, and its
 * check-back must answer rollback, which the barrier does).
 *
 * `local` must throw only when its transaction did **not** commit. The
 * barrier's helpers throw {@link OutcomeUnknownError} when COMMIT's outcome is
 * unknown, and {@link AlreadyDecidedError} `commit` when an earlier run of the
 * key committed: then no decision is sent and check-back decides.
 */
export async function runTransaction<T, R>(
  way: WayIn<R>,
  message: Message,
  local: (prepared: R) => Promise<T>,
  options: TransactionOptions = {},
): Promise<TransactionResult<T, R>> {
  if (typeof local !== 'function') throw new TypeError('local must be a function: async (prepared) => { … }');
  const logger = options.logger ?? way.logger ?? console;
  const call = { signal: options.signal };
  const key = message.message_key;
  const prepared = await way.prepare(message, call);
  let value: T;
  try {
    value = await local(prepared);
  } catch (error) {
    if (leaveToCheckBack(error)) {
      logger.warn('no decision sent; check-back will decide', { bizId: way.bizId, messageKey: key, error: String(error) });
      throw error;
    }
    try {
      await way.rollback(key, call);
    } catch (rollbackError) {
      if (isUnavailable(rollbackError) || rollbackError instanceof UserAbortError) {
        logger.warn('rollback not delivered; check-back will roll back', { bizId: way.bizId, messageKey: key, error: String(rollbackError) });
      } else {
        logger.error('the local transaction failed but trustmsg refused the rollback', { bizId: way.bizId, messageKey: key, error: String(rollbackError) });
      }
    }
    throw error;
  }
  try {
    return { status: 'committed', value, receipt: await way.commit(key, call) };
  } catch (e) {
    const error = e as TrustmsgError;
    if (isUnavailable(e) || e instanceof UserAbortError) {
      logger.warn('commit not delivered; check-back will decide', { bizId: way.bizId, messageKey: key, error: String(e) });
      return { status: 'commit_left_to_check_back', value, error };
    }
    logger.error('the local transaction committed but trustmsg refused the commit', { bizId: way.bizId, messageKey: key, error: String(e) });
    return { status: 'commit_rejected', value, error };
  }
}
