/**
 * The HTTP client for trustmsg's producer API, on the built-in `fetch`.
 *
 * Every producer call is idempotent on the server (the same prepare twice is a
 * 200 with the same view, the same decision twice is a 200), so a call whose
 * answer was lost can be repeated safely. Network errors, timeouts and 5xx
 * are therefore retried with exponential backoff and jitter; 4xx answers are
 * final and never retried, because repeating them cannot change the answer.
 */
import { APIError, ConfigError, UnavailableError, UnexpectedResponseError, UserAbortError } from './errors.js';
import { parseJson, type Json } from './json.js';
import { checkShape } from './message.js';
import { traceHeaders } from './trace.js';
import { runTransaction, type TransactionOptions, type TransactionResult } from './transaction.js';
import { toLogger, type AnyLogger, type Logger } from './logger.js';
import type { CallOptions, Message, MessageView } from './types.js';
import { VERSION } from './version.js';

/** How a {@link Producer} is set up. */
export interface ProducerOptions {
  /** trustmsg's base URL, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  baseURL: string;
  /** The producer's id (its registration). */
  bizId: string;
  /** The producer's bearer token. */
  token: string;
  /** Retries after the first attempt, for network errors, timeouts and 5xx (default 5; 0: try once). */
  maxRetries?: number;
  /** The delay before the first retry, doubling for each next one (default 100 ms), plus up to half again of jitter. */
  minRetryDelayMs?: number;
  /** The largest delay between two attempts (default 5000 ms). A 5xx's `Retry-After` is honoured up to 60 s. */
  maxRetryDelayMs?: number;
  /** How long one request may take (default 10 000 ms). */
  timeoutMs?: number;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
  /** Where warnings go: a pino logger (or any fields-first logger), else one JSON line per event on stderr. */
  logger?: AnyLogger | undefined;
}

const MAX_RETRY_AFTER_MS = 60_000;

/** The delay before retry number `retry` (1-based): doubling from `min`, capped at `max`, with up to +50 % jitter. */
export function backoffDelay(retry: number, min: number, max: number, random: () => number = Math.random): number {
  const base = Math.min(max, min * 2 ** (retry - 1));
  return Math.min(max, Math.round(base * (1 + random() / 2)));
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new UserAbortError(signal.reason));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new UserAbortError(signal?.reason));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function toBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

/** The prepare request body for producer `bizId` (the HTTP API's `PrepareRequest`). */
export function prepareRequest(bizId: string, m: Message): Record<string, unknown> {
  checkShape(m);
  const body: Record<string, unknown> = { biz_id: bizId, message_key: m.message_key, topic: m.topic };
  if (typeof m.payload === 'string') body['payload'] = m.payload;
  else if (m.payload instanceof Uint8Array) {
    body['payload'] = toBase64(m.payload);
    body['payload_encoding'] = 'base64';
  } else {
    throw new ConfigError('message.payload must be a string or a Uint8Array');
  }
  if (m.key !== undefined) body['key'] = m.key;
  if (m.headers !== undefined && Object.keys(m.headers).length > 0) body['headers'] = { ...m.headers };
  if (m.deliver_at !== undefined) {
    if (!(m.deliver_at instanceof Date) || Number.isNaN(m.deliver_at.getTime())) throw new ConfigError('message.deliver_at must be a valid Date');
    body['deliver_at'] = m.deliver_at.toISOString();
  }
  if (m.deliver_after_ms !== undefined) body['deliver_after_ms'] = m.deliver_after_ms;
  return body;
}

/** A message view from an answer's JSON, its id as a `bigint`. */
function messageView(json: Json, status: number): MessageView {
  if (typeof json !== 'object' || json === null || Array.isArray(json) || !('id' in json) || !('status' in json)) {
    throw new UnexpectedResponseError(status, 'unexpected', 'the answer is not a message view');
  }
  const id = json['id'];
  if (typeof id !== 'number' && typeof id !== 'bigint') {
    throw new UnexpectedResponseError(status, 'unexpected', 'the message view has no numeric id');
  }
  return { ...(json as object), id: BigInt(id) } as MessageView;
}

interface Transient {
  message: string;
  status?: number | undefined;
  code?: string | undefined;
  retryAfterMs?: number | undefined;
  cause?: unknown;
}

/**
 * A trustmsg producer: its biz_id, its bearer token and the service's address.
 *
 * ```ts
 * const producer = new Producer({ baseURL: 'http://127.0.0.1:8080', bizId: 'shop', token });
 * await producer.prepare({ message_key: 'order-42', topic: 'orders', payload: '{"order":42}' });
 * // … the local transaction …
 * const view = await producer.commit('order-42');
 * ```
 */
export class Producer {
  readonly bizId: string;
  readonly #base: URL;
  readonly #token: string;
  readonly #maxRetries: number;
  readonly #minDelay: number;
  readonly #maxDelay: number;
  readonly #timeout: number;
  readonly #fetch: typeof fetch;
  /** The logger as given (undefined: the default). */
  readonly logger: AnyLogger | undefined;
  readonly #log: Logger;

  constructor(options: ProducerOptions) {
    if (typeof options !== 'object' || options === null) throw new ConfigError('new Producer({ baseURL, bizId, token })');
    let base: URL;
    try {
      base = new URL(options.baseURL);
    } catch {
      throw new ConfigError(`baseURL ${JSON.stringify(options.baseURL)} is not a URL (e.g. http://127.0.0.1:8080)`);
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:') {
      throw new ConfigError(`baseURL ${JSON.stringify(options.baseURL)} is not an http(s) URL`);
    }
    if (!base.pathname.endsWith('/')) base.pathname += '/';
    if (typeof options.bizId !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(options.bizId)) {
      throw new ConfigError(`bizId must be 1 to 64 of A-Z a-z 0-9 . _ - (got ${JSON.stringify(options.bizId)})`);
    }
    if (typeof options.token !== 'string' || options.token === '') throw new ConfigError("token is required: the producer's bearer token");
    const count = (name: string, v: number | undefined, d: number): number => {
      if (v === undefined) return d;
      if (!Number.isSafeInteger(v) || v < 0) throw new ConfigError(`${name} must be a whole number, 0 or more (got ${String(v)})`);
      return v;
    };
    this.bizId = options.bizId;
    this.#base = base;
    this.#token = options.token;
    this.#maxRetries = count('maxRetries', options.maxRetries, 5);
    this.#minDelay = count('minRetryDelayMs', options.minRetryDelayMs, 100);
    this.#maxDelay = count('maxRetryDelayMs', options.maxRetryDelayMs, 5000);
    this.#timeout = count('timeoutMs', options.timeoutMs, 10_000);
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.logger = options.logger;
    this.#log = toLogger(options.logger);
  }

  /**
   * `POST /v1/messages/prepare`: stores the message as PREPARED. Repeating it
   * with identical content returns the same view; other content under the
   * same key is a {@link ConflictError} (`prepare_conflict`). A prepare of a
   * message that was rolled back is an {@link AlreadyRolledBackError} (409
   * `already_rolled_back`, or `rolled_back` after a rollback of a message
   * trustmsg never saw). A prepare of a COMMITTED message answers 200 with
   * its view (status `COMMITTED`): the transaction helpers check it.
   */
  async prepare(message: Message, options: CallOptions = {}): Promise<MessageView> {
    const body = JSON.stringify(prepareRequest(this.bizId, message));
    return this.#call('POST', ['v1', 'messages', 'prepare'], body, await traceHeaders(message), options);
  }

  /**
   * `POST /v1/messages/commit`: decides for delivery. Repeating it is a 200;
   * after a rollback it is an {@link AlreadyRolledBackError} (a {@link ConflictError}, `already_rolled_back`);
   * for an unknown message a {@link NotFoundError}.
   */
  commit(messageKey: string, options: CallOptions = {}): Promise<MessageView> {
    return this.#decide('commit', messageKey, options);
  }

  /**
   * `POST /v1/messages/rollback`: decides against delivery. Repeating it is a
   * 200; after a commit it is a {@link ConflictError} (`already_committed`);
   * for an unknown message it leaves a tombstone, so a late prepare is refused.
   */
  rollback(messageKey: string, options: CallOptions = {}): Promise<MessageView> {
    return this.#decide('rollback', messageKey, options);
  }

  /** `GET /v1/messages/{biz_id}/{message_key}`: the message's current view. */
  get(messageKey: string, options: CallOptions = {}): Promise<MessageView> {
    this.#checkKey(messageKey);
    return this.#call('GET', ['v1', 'messages', this.bizId, messageKey], undefined, {}, options);
  }

  /**
   * Prepare `message`, run `local` (the local transaction), then commit the
   * message if `local` resolved or roll it back if it threw, and rethrow
   * `local`'s own error. `local` runs only when prepare answered PREPARED:
   * else {@link AlreadyCommittedError}, {@link AlreadyRolledBackError} or
   * {@link NotPreparedError}. See {@link runTransaction}; for a transaction on
   * MySQL or PostgreSQL with the barrier, use `transaction` of
   * `@trustmsg/client/mysql` or `@trustmsg/client/postgres`.
   */
  transaction<T>(message: Message, local: (prepared: MessageView) => Promise<T>, options: TransactionOptions = {}): Promise<TransactionResult<T, MessageView>> {
    return runTransaction(this, message, local, { logger: this.logger, ...options });
  }

  #checkKey(messageKey: unknown): void {
    if (typeof messageKey !== 'string' || messageKey === '') throw new ConfigError('messageKey must be a non-empty string');
  }

  #decide(what: 'commit' | 'rollback', messageKey: string, options: CallOptions): Promise<MessageView> {
    this.#checkKey(messageKey);
    const body = JSON.stringify({ biz_id: this.bizId, message_key: messageKey });
    return this.#call('POST', ['v1', 'messages', what], body, {}, options);
  }

  async #call(method: string, segments: string[], body: string | undefined, extra: Record<string, string>, options: CallOptions): Promise<MessageView> {
    const url = new URL(segments.map(encodeURIComponent).join('/'), this.#base);
    const signal = options.signal;
    const headers: Record<string, string> = {
      ...extra,
      authorization: `Bearer ${this.#token}`,
      accept: 'application/json',
      'user-agent': `trustmsg-node/${VERSION}`,
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let attempts = 0;
    for (;;) {
      if (signal?.aborted) throw new UserAbortError(signal.reason);
      attempts++;
      const outcome = await this.#attempt(method, url, headers, body, signal);
      if (!('transient' in outcome)) return outcome.view;
      const t = outcome.transient;
      if (attempts > this.#maxRetries) {
        throw new UnavailableError(attempts, t.message, { status: t.status, code: t.code, cause: t.cause });
      }
      let delay = backoffDelay(attempts, this.#minDelay, this.#maxDelay);
      if (t.retryAfterMs !== undefined) delay = Math.max(delay, Math.min(t.retryAfterMs, MAX_RETRY_AFTER_MS));
      this.#log.warn({ method, url: url.href, error: t.message, retryInMs: delay, attempt: attempts }, 'trustmsg call failed; retrying');
      await sleep(delay, signal);
    }
  }

  async #attempt(
    method: string,
    url: URL,
    headers: Record<string, string>,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ view: MessageView } | { transient: Transient }> {
    const timeout = AbortSignal.timeout(this.#timeout);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let res: Response;
    let text: string;
    try {
      // No redirects: the token must not travel elsewhere.
      res = await this.#fetch(url, { method, headers, body: body ?? null, signal: both, redirect: 'manual' });
      text = await res.text();
    } catch (e) {
      if (signal?.aborted) throw new UserAbortError(signal.reason);
      const why = timeout.aborted ? `no answer within ${this.#timeout} ms` : describeNetworkError(e);
      return { transient: { message: why, cause: e } };
    }
    if (res.status >= 200 && res.status < 300) {
      let json: Json;
      try {
        json = parseJson(text);
      } catch (e) {
        throw new UnexpectedResponseError(res.status, 'unexpected', `the answer is not JSON: ${(e as Error).message}`);
      }
      return { view: messageView(json, res.status) };
    }
    const { code, message } = errorBody(res.status, text);
    if (res.status >= 500) {
      const ra = res.headers.get('retry-after');
      const secs = ra !== null && /^\s*\d+\s*$/.test(ra) ? Number(ra) * 1000 : undefined;
      return { transient: { message: `${res.status} ${code ?? ''}: ${message}`.replace(' :', ':'), status: res.status, code, retryAfterMs: secs } };
    }
    throw APIError.of(res.status, code, message);
  }
}

function describeNetworkError(e: unknown): string {
  let text = e instanceof Error ? e.message : String(e);
  let cause = e instanceof Error ? e.cause : undefined;
  // "fetch failed" alone hides a refused connection or an untrusted certificate.
  while (cause !== undefined && cause !== null) {
    text += `: ${cause instanceof Error ? cause.message : JSON.stringify(cause)}`;
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return text;
}

function errorBody(status: number, text: string): { code: string | undefined; message: string } {
  try {
    const j = parseJson(text);
    if (typeof j === 'object' && j !== null && !Array.isArray(j)) {
      const err = j['error'];
      if (typeof err === 'object' && err !== null && !Array.isArray(err) && typeof err['code'] === 'string') {
        return { code: err['code'], message: typeof err['message'] === 'string' ? err['message'] : '' };
      }
    }
  } catch {
    // not trustmsg's error shape: a proxy's page
  }
  const shown = text.slice(0, 200).trim();
  return { code: undefined, message: shown === '' ? `HTTP ${status}` : `HTTP ${status}: ${shown}` };
}
