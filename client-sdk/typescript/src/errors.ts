/**
 * The errors of the SDK. Every failure a caller may need to tell apart is its
 * own class, carrying trustmsg's error `code` and the HTTP `status` when the
 * service answered:
 *
 * ```ts
 * try {
 *   await producer.commit('order-42');
 * } catch (e) {
 *   if (e instanceof ConflictError) console.log(e.code); // 'already_rolled_back'
 *   else throw e;
 * }
 * ```
 *
 * 4xx answers are final and never retried. Network errors and 5xx are retried
 * (every producer call is idempotent on the server) and, once the retries are
 * used up, become {@link UnavailableError}.
 */

import type { MessageView } from './types.js';
import { isView } from './view.js';

/** What every error thrown by the SDK is. */
export class TrustmsgError extends Error {
  /** trustmsg's error code (e.g. `prepare_conflict`), when there is one. */
  readonly code: string | undefined;
  /** The HTTP status of the (last) answer, when there was one. */
  readonly status: number | undefined;

  constructor(message: string, options: { code?: string | undefined; status?: number | undefined; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code;
    this.status = options.status;
  }
}

/** An error answer of the service (any status but a retried 5xx). */
export class APIError extends TrustmsgError {
  declare readonly status: number;
  declare readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(`${status} ${code}: ${message}`, { code, status });
  }

  /** The class for a final (never retried) error answer. */
  static of(status: number, code: string | undefined, message: string): APIError {
    switch (status) {
      case 400:
      case 413:
      case 415:
        return new BadRequestError(status, code ?? 'invalid', message);
      case 401:
        return new AuthenticationError(status, code ?? 'unauthorized', message);
      case 403:
        return new PermissionDeniedError(status, code ?? 'forbidden', message);
      case 404:
        return new NotFoundError(status, code ?? 'not_found', message);
      case 409:
        if (code === 'already_rolled_back' || code === 'rolled_back') return new AlreadyRolledBackError(status, code, message);
        return new ConflictError(status, code ?? 'conflict', message);
      default:
        return new UnexpectedResponseError(status, code ?? 'unexpected', message);
    }
  }
}

/**
 * 400, 413 or 415: the request is invalid and stays invalid (e.g.
 * `invalid_topic`, `payload_too_large`). The SDK also throws it, with status
 * 400 and the HTTP API's code, for what it refuses before sending anything.
 */
export class BadRequestError extends APIError {}
/** 401: the token is missing or wrong. */
export class AuthenticationError extends APIError {}
/** 403: the token belongs to another producer, or the topic is not allowed. */
export class PermissionDeniedError extends APIError {}
/** 404: e.g. `message_not_found` on commit or get of an unknown message. */
export class NotFoundError extends APIError {}
/**
 * 409: `prepare_conflict` (same key, other content), `already_committed` (a
 * rollback after a commit); `already_rolled_back` and `rolled_back` come as
 * its subclass {@link AlreadyRolledBackError}.
 */
export class ConflictError extends APIError {}

/**
 * The message is rolled back: it can never be delivered, so work done for it
 * must not be done (again). A 409 `already_rolled_back` (a prepare or commit
 * of a message that was rolled back) or `rolled_back` (a prepare after a
 * rollback of a message trustmsg never saw: its tombstone). The transaction
 * helpers throw it too, with code `already_rolled_back`, when they find it out
 * themselves: a prepare answered 200 with status `ROLLED_BACK` (an older
 * trustmsg), or the barrier holds the `rollback` marker. Then the local work
 * did not run. A {@link ConflictError}, so `instanceof ConflictError` still
 * catches it; an order service answers it "refused" (409), never "try again".
 */
export class AlreadyRolledBackError extends ConflictError {}
/** Any other status, or a 2xx whose body is not what the API promises. */
export class UnexpectedResponseError extends APIError {}

/**
 * Network errors, timeouts or 5xx on every attempt. The call may or may not
 * have reached trustmsg; every producer call is idempotent, so repeating it
 * later is safe. `status` and `code` are the last attempt's, if it got an
 * answer.
 */
export class UnavailableError extends TrustmsgError {
  /** How many requests were made. */
  readonly attempts: number;

  constructor(attempts: number, message: string, options: { code?: string | undefined; status?: number | undefined; cause?: unknown } = {}) {
    super(`trustmsg unavailable after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${message}`, options);
    this.attempts = attempts;
  }
}

/**
 * A record submitted to trustmsg's submit topic was not acknowledged by Kafka.
 * It may still have been written; every submitted operation is idempotent.
 */
export class NotAcknowledgedError extends TrustmsgError {}

/** The caller's `AbortSignal` fired: the call was given up. */
export class UserAbortError extends TrustmsgError {
  constructor(cause?: unknown) {
    super('the call was aborted by its AbortSignal', { cause });
  }
}

/** The SDK was given a setting or argument it cannot work with. */
export class ConfigError extends TrustmsgError {}

/** True for errors after which repeating the call later is safe and may succeed. */
export function isUnavailable(e: unknown): e is UnavailableError | NotAcknowledgedError {
  return e instanceof UnavailableError || e instanceof NotAcknowledgedError;
}

/** A check-back call that is not trustmsg's: answer 401. */
export class WebhookVerificationError extends TrustmsgError {
  constructor(code: 'missing_signature' | 'bad_timestamp' | 'signature_expired' | 'bad_signature', message: string) {
    super(message, { code, status: 401 });
  }
}

/**
 * The barrier already holds a marker for this message, so the local work did
 * not run: `rollback` means check-back answered rollback (this transaction
 * must not commit); `commit` means an earlier transaction of the same key
 * committed.
 */
export class AlreadyDecidedError extends TrustmsgError {
  readonly decision: 'commit' | 'rollback';

  constructor(decision: 'commit' | 'rollback', bizId: string, messageKey: string) {
    super(`the barrier already holds a ${decision} marker for ${bizId}/${JSON.stringify(messageKey)}`, { code: 'already_decided' });
    this.decision = decision;
  }
}

/**
 * The transaction helper found the message already COMMITTED, so the local
 * work did not run (again): prepare answered 200 with status `COMMITTED` (a
 * retry of an order that went through), or the barrier holds the `commit`
 * marker of an earlier run (a retry of an order whose first attempt stopped
 * after its local COMMIT: the helper then sent the commit itself). The work
 * was done once, before: answer "already placed".
 */
export class AlreadyCommittedError extends TrustmsgError {
  readonly messageKey: string;
  /** The receipt saying so: prepare's, or that of the commit the helper sent (undefined if that commit could not be delivered). */
  readonly receipt: unknown;
  /** `receipt` when it is trustmsg's message view (through a `Producer`), else undefined. */
  readonly view: MessageView | undefined;
  /**
   * Why the commit the helper sent after finding the `commit` marker was not
   * delivered (trustmsg unreachable, or the call aborted); check-back, answered
   * from the barrier, commits the message. Undefined otherwise.
   */
  readonly commitError: TrustmsgError | undefined;

  constructor(messageKey: string, receipt: unknown, commitError?: TrustmsgError) {
    super(`message ${JSON.stringify(messageKey)} is already committed: its local work ran before and did not run again`, { code: 'already_committed' });
    this.messageKey = messageKey;
    this.receipt = receipt;
    this.view = isView(receipt) ? receipt : undefined;
    this.commitError = commitError;
  }
}

/**
 * Prepare answered a status the transaction helper cannot run local work
 * under, other than COMMITTED and ROLLED_BACK: `VERIFY_FAILED` (check-back
 * gave up on it; an operator decides), or a status this SDK does not know.
 * The local work did not run.
 */
export class NotPreparedError extends TrustmsgError {
  readonly messageKey: string;
  /** The status prepare answered, e.g. `VERIFY_FAILED`. */
  readonly messageStatus: string;
  /** Prepare's receipt (the message view, through a `Producer`). */
  readonly receipt: unknown;

  constructor(messageKey: string, messageStatus: string, receipt: unknown) {
    super(`prepare of ${JSON.stringify(messageKey)} answered status ${messageStatus}, not PREPARED: the local work did not run`, {
      code: 'not_prepared',
    });
    this.messageKey = messageKey;
    this.messageStatus = messageStatus;
    this.receipt = receipt;
  }
}

/**
 * The local transaction **committed** but trustmsg refused the commit (e.g.
 * 409 `already_rolled_back`: an operator rolled the message back): local
 * state and message disagree and someone must look. `value` is what the local
 * work returned, `cause` trustmsg's error; `code` and `status` are its.
 */
export class CommitRejectedError extends TrustmsgError {
  readonly messageKey: string;
  /** What the local work returned (undefined when an earlier run committed it: the barrier's `commit` marker). */
  readonly value: unknown;
  declare readonly cause: unknown;

  constructor(messageKey: string, value: unknown, cause: unknown) {
    const e = cause instanceof TrustmsgError ? cause : undefined;
    super(`the local transaction of ${JSON.stringify(messageKey)} committed but trustmsg refused the commit: ${String(cause)}`, {
      code: e?.code,
      status: e?.status,
      cause,
    });
    this.messageKey = messageKey;
    this.value = value;
  }
}

/**
 * The local transaction did **not** commit but trustmsg refused the rollback
 * (409 `already_committed`: an operator committed the message): local state
 * and message disagree and someone must look. `workError` is what the local
 * work threw, `cause` trustmsg's error.
 */
export class RollbackRejectedError extends TrustmsgError {
  readonly messageKey: string;
  /** What the local work threw. */
  readonly workError: unknown;
  declare readonly cause: unknown;

  constructor(messageKey: string, workError: unknown, cause: unknown) {
    const e = cause instanceof TrustmsgError ? cause : undefined;
    super(`the local transaction of ${JSON.stringify(messageKey)} did not commit but trustmsg refused the rollback: ${String(cause)}`, {
      code: e?.code,
      status: e?.status,
      cause,
    });
    this.messageKey = messageKey;
    this.workError = workError;
  }
}

/**
 * COMMIT of the local transaction failed and the barrier could not be read
 * to learn whether it was applied: only a later check-back can tell, so no
 * decision was sent.
 */
export class OutcomeUnknownError extends TrustmsgError {
  constructor(cause: unknown) {
    super(`the local transaction's outcome is unknown; check-back decides: ${String(cause)}`, { code: 'outcome_unknown', cause });
  }
}

/**
 * The local message table already holds a row with this message key (its
 * unique key): each message needs a key of its own.
 */
export class DuplicateMessageError extends TrustmsgError {
  readonly messageKey: string;

  constructor(messageKey: string, cause: unknown) {
    super(`the outbox already holds a message with message_key ${JSON.stringify(messageKey)}: each message needs a key of its own`, {
      code: 'duplicate_message_key',
      cause,
    });
    this.messageKey = messageKey;
  }
}

/** A record without a usable `trustmsg-message-id` header: not trustmsg's. */
export class NoMessageIdError extends TrustmsgError {
  constructor() {
    super('the record has no valid trustmsg-message-id header; it was not sent by trustmsg', { code: 'no_message_id' });
  }
}
