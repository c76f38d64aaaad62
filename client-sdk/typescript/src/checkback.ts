/**
 * The check-back endpoint: verify trustmsg's signed call (Standard Webhooks),
 * then answer from the barrier or from a function the application gives.
 *
 * The signature covers `webhook-id`, `webhook-timestamp` and the raw body; the
 * timestamp must be within 5 minutes of the local clock, so a captured call
 * cannot be replayed later. A call that fails this gets 401 and the decision
 * function is never called (the database is never touched).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { ConfigError, WebhookVerificationError } from './errors.js';
import { parseJson, type Json } from './json.js';
import { toLogger, type AnyLogger } from './logger.js';
import type { CheckRequest, Decision } from './types.js';

/** Where the handlers are usually mounted. */
export const DEFAULT_CHECK_PATH = '/trustmsg/check';
/** How far `webhook-timestamp` may be from the local clock, in seconds (Standard Webhooks' recommendation). */
export const DEFAULT_TOLERANCE_SECS = 300;
/** The largest body a check-back call has (trustmsg reads at most this much of an answer too). */
export const MAX_BODY_BYTES = 64 * 1024;

/** Headers as frameworks give them: a `Headers`, or Node's lower-cased `IncomingHttpHeaders`. */
export type HeaderSource = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

function header(headers: HeaderSource, name: string): string | undefined {
  let v: string | readonly string[] | null | undefined;
  if (typeof (headers as Headers).get === 'function') v = (headers as Headers).get(name);
  else {
    const h = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
    v = h[name] ?? Object.entries(h).find(([k]) => k.toLowerCase() === name)?.[1];
  }
  if (Array.isArray(v)) v = v[0] as string | undefined;
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** The HMAC key of a `whsec_<base64>` secret; a {@link ConfigError} for anything else. */
export function signingKey(secret: string): Buffer {
  if (typeof secret !== 'string' || !secret.startsWith('whsec_')) {
    throw new ConfigError("the signing secret is not whsec_<base64>: use the registration's signing_secret");
  }
  const b64 = secret.slice('whsec_'.length);
  if (b64 === '' || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 === 1) {
    throw new ConfigError('the signing secret is not whsec_<base64>: its part after whsec_ is not base64');
  }
  return Buffer.from(b64, 'base64');
}

function bytesOf(body: Uint8Array | string): Buffer {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/** `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`: how trustmsg signs a check-back call. */
export function signCheckBack(secret: string, webhookId: string, timestamp: number | string, body: Uint8Array | string): string {
  const mac = createHmac('sha256', signingKey(secret));
  mac.update(`${webhookId}.${String(timestamp)}.`);
  mac.update(bytesOf(body));
  return `v1,${mac.digest('base64')}`;
}

/** The check-back verifier's settings. */
export interface VerifyOptions {
  /** Seconds `webhook-timestamp` may be away from the clock, either way (default 300). */
  toleranceSecs?: number;
  /** The clock, in unix seconds (default: the system's). */
  now?: () => number;
}

/**
 * Verifies a check-back call: returns when `body` (the raw bytes as received)
 * was signed with `secret` within the tolerance, throws
 * {@link WebhookVerificationError} (answer 401) otherwise.
 */
export function verifyCheckBack(secret: string | Buffer, headers: HeaderSource, body: Uint8Array | string, options: VerifyOptions = {}): void {
  const key = typeof secret === 'string' ? signingKey(secret) : secret;
  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  const sigs = header(headers, 'webhook-signature');
  if (id === undefined || ts === undefined || sigs === undefined) {
    throw new WebhookVerificationError('missing_signature', 'webhook-id, webhook-timestamp and webhook-signature are required');
  }
  if (!/^-?\d{1,15}$/.test(ts)) throw new WebhookVerificationError('bad_timestamp', 'webhook-timestamp is not an integer');
  const now = options.now?.() ?? Math.floor(Date.now() / 1000);
  const tolerance = options.toleranceSecs ?? DEFAULT_TOLERANCE_SECS;
  if (Math.abs(now - Number(ts)) > tolerance) {
    throw new WebhookVerificationError('signature_expired', `webhook-timestamp is more than ${tolerance} s away from this clock`);
  }
  const mac = createHmac('sha256', key);
  mac.update(`${id}.${ts}.`);
  mac.update(bytesOf(body));
  const expected = Buffer.from(mac.digest('base64'));
  for (const entry of sigs.split(' ')) {
    const comma = entry.indexOf(',');
    if (comma < 0 || entry.slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(entry.slice(comma + 1));
    if (given.length === expected.length && timingSafeEqual(given, expected)) return;
  }
  throw new WebhookVerificationError('bad_signature', 'no v1 signature matches');
}

/** Parses a verified check-back body; unknown fields are ignored. Throws `SyntaxError` for a body that is not one. */
export function parseCheckRequest(body: Uint8Array | string): CheckRequest {
  const text = typeof body === 'string' ? body : new TextDecoder('utf-8', { fatal: true }).decode(body);
  const j: Json = parseJson(text);
  if (typeof j !== 'object' || j === null || Array.isArray(j)) throw new SyntaxError('a check-back request is a JSON object');
  const { biz_id, message_key, message_id, attempt, prepared_at } = j;
  if (typeof biz_id !== 'string' || typeof message_key !== 'string') throw new SyntaxError('biz_id and message_key must be strings');
  if ((typeof message_id !== 'number' && typeof message_id !== 'bigint') || !Number.isInteger(Number(message_id)) || BigInt(message_id) < 0n) {
    throw new SyntaxError('message_id must be an unsigned integer');
  }
  if (typeof attempt !== 'number' || !Number.isInteger(attempt)) throw new SyntaxError('attempt must be an integer');
  if (typeof prepared_at !== 'string') throw new SyntaxError('prepared_at must be a string');
  return { biz_id, message_key, message_id: BigInt(message_id), attempt, prepared_at };
}

/** The answer's body: `{"message_id":…,"decision":…}` with every digit of the id. */
export function checkAnswer(messageId: bigint, decision: Decision): string {
  return `{"message_id":${messageId.toString()},"decision":${JSON.stringify(decision)}}`;
}

/** What decides a verified check-back: the barrier's `barrierDecider(pool)`, or the application's own function. */
export type Decider = (request: CheckRequest) => Decision | Promise<Decision>;

/** The check-back handlers' settings. */
export interface CheckBackOptions extends VerifyOptions {
  /** The producer's `signing_secret` (`whsec_…`) from its registration. */
  secret: string;
  /** Answers a verified call; a throw is answered 500, which trustmsg counts as a failed attempt and asks again later. */
  decide: Decider;
  /** Where refusals and failures are reported: a pino logger, or one JSON line on stderr (see `Logger`). */
  logger?: AnyLogger | undefined;
}

/** An HTTP answer, whatever the framework. */
export interface CheckBackAnswer {
  status: number;
  body: string;
}

function error(status: number, code: string, message: string): CheckBackAnswer {
  return { status, body: JSON.stringify({ error: { code, message } }) };
}

/**
 * The framework-neutral core of every handler: verifies, parses, asks
 * `decide`, and says what to answer. The Express, Fastify and `Request`/
 * `Response` handlers are this plus their framework's reading and writing.
 */
export function createCheckBackHandler(options: CheckBackOptions): (headers: HeaderSource, body: Uint8Array | string) => Promise<CheckBackAnswer> {
  if (typeof options !== 'object' || options === null) throw new ConfigError('give { secret, decide }');
  // A misconfigured secret stops the service at start-up, not every check-back.
  const key = signingKey(options.secret);
  if (typeof options.decide !== 'function') {
    throw new ConfigError('decide is required: barrierDecider(pool) of @trustmsg/client/mysql or /postgres, or (request) => decision');
  }
  const { decide } = options;
  const logger = toLogger(options.logger);
  return async (headers, body) => {
    try {
      verifyCheckBack(key, headers, body, options);
    } catch (e) {
      if (e instanceof WebhookVerificationError) {
        logger.warn({ webhookId: header(headers, 'webhook-id'), error: e.message }, 'check-back refused');
        return error(401, e.code ?? 'bad_signature', e.message);
      }
      throw e;
    }
    let request: CheckRequest;
    try {
      request = parseCheckRequest(body);
    } catch (e) {
      return error(400, 'bad_body', `not a check-back request: ${(e as Error).message}`);
    }
    let decision: Decision;
    try {
      decision = await decide(request);
    } catch (e) {
      // The cause may be internal detail; trustmsg only needs to know to ask again.
      logger.error({ bizId: request.biz_id, messageKey: request.message_key, error: String(e) }, 'check-back decision failed');
      return error(500, 'decision_failed', 'the producer could not decide; ask again later');
    }
    if (decision !== 'commit' && decision !== 'rollback' && decision !== 'unknown') {
      logger.error({ decision: String(decision) }, 'check-back decider returned no decision');
      return error(500, 'decision_failed', 'the producer could not decide; ask again later');
    }
    return { status: 200, body: checkAnswer(request.message_id, decision) };
  };
}

/**
 * The check-back endpoint as a standard `Request` → `Response` function: for
 * Hono (`app.post('/trustmsg/check', (c) => handler(c.req.raw))`), Next.js
 * route handlers (`export const POST = handler`), Deno, Bun, Cloudflare.
 */
export function checkBackFetchHandler(options: CheckBackOptions): (request: Request) => Promise<Response> {
  const handle = createCheckBackHandler(options);
  const json = { 'content-type': 'application/json' };
  return async (request) => {
    if (request.method !== 'POST') {
      return new Response(error(405, 'method_not_allowed', 'check-back is a POST').body, { status: 405, headers: { ...json, allow: 'POST' } });
    }
    const length = Number(request.headers.get('content-length') ?? '0');
    if (length > MAX_BODY_BYTES) return new Response(error(413, 'too_large', 'a check-back body is at most 64 KiB').body, { status: 413, headers: json });
    const body = new Uint8Array(await request.arrayBuffer());
    if (body.byteLength > MAX_BODY_BYTES)
      return new Response(error(413, 'too_large', 'a check-back body is at most 64 KiB').body, { status: 413, headers: json });
    const answer = await handle(request.headers, body);
    return new Response(answer.body, { status: answer.status, headers: json });
  };
}
