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
 * 409: `prepare_conflict` (same key, other content), `rolled_back` (a prepare
 * after a rollback), `already_committed`, `already_rolled_back`.
 */
export class ConflictError extends APIError {}
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
