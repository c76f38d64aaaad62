/**
 * A {@link Message} checked as trustmsg checks a prepare, wherever the SDK can
 * tell: the same limits and the same error codes as the HTTP API. Used where
 * a refusal would come only later (the local message table's relay, the
 * Kafka way in's dead-letter topic), so that it comes at once instead.
 */
import { BadRequestError } from './errors.js';
import type { Message } from './types.js';

const MAX_MESSAGE_KEY = 128;
const MAX_TOPIC = 249;
const MAX_RECORD_KEY = 1024;
const MAX_HEADERS = 64;
const MAX_HEADER_NAME = 256;
const MAX_HEADER_BYTES = 16 * 1024;
/** The longest delivery delay: 7 days. */
export const MAX_DELIVERY_DELAY_MS = 7 * 24 * 60 * 60 * 1000;
/** Header names trustmsg keeps for itself. */
export const RESERVED_PREFIX = 'trustmsg-';

// Unicode's Cc category, as Rust's char::is_control.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

const encoder = new TextEncoder();

/** The UTF-8 length of `s`. */
export function utf8Length(s: string): number {
  return encoder.encode(s).length;
}

function invalid(code: string, message: string): BadRequestError {
  return new BadRequestError(400, code, message);
}

export function checkMessageKey(v: unknown): asserts v is string {
  if (typeof v !== 'string') throw invalid('invalid_message_key', `message_key must be a string (got ${typeof v})`);
  const n = utf8Length(v);
  if (n === 0 || n > MAX_MESSAGE_KEY) {
    throw invalid('invalid_message_key', `message_key must be 1 to ${MAX_MESSAGE_KEY} bytes of UTF-8 (got ${n})`);
  }
  if (CONTROL.test(v)) throw invalid('invalid_message_key', 'message_key must not contain control characters');
}

export function checkTopic(v: unknown): asserts v is string {
  if (typeof v !== 'string') throw invalid('invalid_topic', `topic must be a string (got ${typeof v})`);
  if (v.length === 0 || v.length > MAX_TOPIC) {
    throw invalid('invalid_topic', `topic must be 1 to ${MAX_TOPIC} characters long (got ${v.length})`);
  }
  if (v === '.' || v === '..') throw invalid('invalid_topic', `topic cannot be ${JSON.stringify(v)}`);
  const bad = /[^A-Za-z0-9._-]/.exec(v);
  if (bad) {
    throw invalid('invalid_topic', `topic may contain only ASCII letters, digits, '.', '_' and '-' (found ${JSON.stringify(bad[0])})`);
  }
}

export function checkRecordKey(v: unknown): void {
  if (v === undefined || v === null) return;
  if (typeof v !== 'string') throw invalid('invalid_key', `key must be a string (got ${typeof v})`);
  const n = utf8Length(v);
  if (n > MAX_RECORD_KEY) throw invalid('invalid_key', `key must be at most ${MAX_RECORD_KEY} bytes (got ${n})`);
}

/** Bounded count and size, non-empty names, no control characters, none in the `trustmsg-` namespace. */
export function checkHeaders(h: unknown): asserts h is Readonly<Record<string, string>> | undefined {
  if (h === undefined || h === null) return;
  if (typeof h !== 'object' || Array.isArray(h)) throw invalid('invalid_headers', 'headers must be an object of strings');
  const entries = Object.entries(h as Record<string, unknown>);
  if (entries.length > MAX_HEADERS) throw invalid('invalid_headers', `at most ${MAX_HEADERS} headers are allowed (got ${entries.length})`);
  let total = 0;
  for (const [name, value] of entries) {
    if (typeof value !== 'string') throw invalid('invalid_headers', `the value of header ${JSON.stringify(name)} must be a string`);
    const n = utf8Length(name);
    if (n === 0 || n > MAX_HEADER_NAME) throw invalid('invalid_headers', `header names must be 1 to ${MAX_HEADER_NAME} bytes long`);
    if (CONTROL.test(name)) {
      throw invalid('invalid_headers', `header name ${JSON.stringify(name)} contains a control character; names and values must be printable text`);
    }
    if (CONTROL.test(value)) {
      throw invalid('invalid_headers', `the value of header ${JSON.stringify(name)} contains a control character; values must be printable text`);
    }
    if (name.toLowerCase().startsWith(RESERVED_PREFIX)) {
      throw invalid('invalid_headers', `header ${JSON.stringify(name)} uses the reserved prefix "${RESERVED_PREFIX}"; trustmsg sets those itself`);
    }
    total += n + utf8Length(value);
  }
  if (total > MAX_HEADER_BYTES) throw invalid('invalid_headers', `headers total ${total} bytes; at most ${MAX_HEADER_BYTES} are allowed`);
}

/** When the message may be sent at the earliest. */
export type Due = { at: Date } | { afterMs: number } | null;

/** The delivery time: at most 7 days ahead of `now`, milliseconds kept, not before 1970. */
export function checkDue(m: Pick<Message, 'deliver_after_ms' | 'deliver_at'>, now: Date): Due {
  const after = m.deliver_after_ms;
  const at = m.deliver_at;
  if (after !== undefined && at !== undefined) {
    throw invalid('invalid_deliver_at', 'give deliver_at or deliver_after_ms, not both');
  }
  if (after !== undefined) {
    if (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 0) {
      throw invalid('invalid_deliver_after_ms', `deliver_after_ms must be a whole number of milliseconds, 0 or more (got ${String(after)})`);
    }
    if (after > MAX_DELIVERY_DELAY_MS) {
      throw invalid('invalid_deliver_after_ms', `deliver_after_ms is ${after}; the longest delay is ${MAX_DELIVERY_DELAY_MS} ms (7 days)`);
    }
    return { afterMs: after };
  }
  if (at !== undefined) {
    if (!(at instanceof Date) || Number.isNaN(at.getTime())) throw invalid('invalid_deliver_at', 'deliver_at must be a valid Date');
    if (at.getTime() < 0) throw invalid('invalid_deliver_at', `deliver_at ${at.toISOString()} is before 1970`);
    const latest = now.getTime() + MAX_DELIVERY_DELAY_MS;
    if (at.getTime() > latest) {
      throw invalid('invalid_deliver_at', `deliver_at ${at.toISOString()} is more than 7 days ahead (the latest now is ${new Date(latest).toISOString()})`);
    }
    return { at };
  }
  return null;
}

/** The version-00 form of a valid W3C `traceparent`, as trustmsg stores it; null when invalid (ignored, never refused). */
export function normalizeTraceparent(v: string | undefined): string | null {
  if (typeof v !== 'string' || v.length < 55) return null;
  const m = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})/.exec(v);
  if (!m) return null;
  const [, version = '', traceId = '', parentId = '', flagsHex = ''] = m;
  if (version === 'ff') return null;
  if (version === '00' ? v.length !== 55 : v.length > 55 && v[55] !== '-') return null;
  if (/^0+$/.test(traceId) || /^0+$/.test(parentId)) return null;
  let flags = parseInt(flagsHex, 16);
  if (version !== '00') flags &= 0x01;
  return `00-${traceId}-${parentId}-${flags.toString(16).padStart(2, '0')}`;
}

/** The payload's bytes. */
export function payloadBytes(payload: unknown): Uint8Array {
  if (typeof payload === 'string') return encoder.encode(payload);
  if (payload instanceof Uint8Array) return payload;
  throw invalid('invalid_payload', 'payload must be a string or a Uint8Array');
}

/** The message must be an object; say so before anything else. */
export function checkShape(m: unknown): asserts m is Message {
  if (typeof m !== 'object' || m === null) throw invalid('invalid_message', 'a message is an object: { message_key, topic, payload, … }');
}
