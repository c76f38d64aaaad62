/**
 * The Kafka way in's records (docs/kafka-submit.md), independent of any Kafka
 * client: what is signed, the signature, and the record to produce. The
 * `Submitter` of `@trustmsg/client/kafka` produces them.
 */
import { createHmac } from 'node:crypto';
import { BadRequestError } from './errors.js';
import { signingKey } from './checkback.js';

/** The operations a record submits. */
export type SubmitOp = 'prepare' | 'commit' | 'rollback';

/** What a submitted record says, before it is signed. */
export interface SubmitFields {
  op: SubmitOp;
  biz_id: string;
  message_key: string;
  /** The target topic (prepare only; empty for a decision). */
  topic: string;
  /** The target record's key (prepare only), or null. */
  key: string | null;
  /** The other headers: user headers, delivery time, trace context (prepare only). */
  headers: Readonly<Record<string, string>>;
  /** The payload (prepare only; empty for a decision). */
  value: Uint8Array;
}

/** A record to produce to the submit topic: key, value and headers in order. */
export interface SubmitRecord {
  key: string;
  value: Uint8Array;
  headers: Array<[string, string]>;
}

const encoder = new TextEncoder();

/** Header names in byte order of their UTF-8, as the signature takes them. */
function byteOrder(names: string[]): string[] {
  return names.sort((a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
}

function lineSafe(what: string, value: string): void {
  if (/[\r\n]/.test(value)) {
    throw new BadRequestError(400, 'invalid_request', `${what} holds a line break: the record signature cannot express it, and trustmsg would dead-letter it`);
  }
}

/**
 * The exact bytes the HMAC covers: the lines op, biz_id, message_key,
 * topic, key, then each other header as `name=value` in byte order of the
 * names, each ending in `\n`, followed by the value. What a line cannot hold
 * (a line break, an `=` in a header name) is refused as ambiguous.
 */
export function submitSigningInput(r: SubmitFields): Uint8Array {
  const lines: string[] = [r.op];
  for (const [name, value] of [
    ['biz_id', r.biz_id],
    ['message_key', r.message_key],
    ['topic', r.topic],
    ['key', r.key ?? ''],
  ] as const) {
    lineSafe(name, value);
    lines.push(value);
  }
  for (const name of byteOrder(Object.keys(r.headers))) {
    const value = r.headers[name] ?? '';
    if (name.includes('=')) {
      throw new BadRequestError(400, 'invalid_request', `header name ${JSON.stringify(name)} holds an "=": the record signature cannot express it`);
    }
    lineSafe(`header ${JSON.stringify(name)}`, name);
    lineSafe(`header ${JSON.stringify(name)}`, value);
    lines.push(`${name}=${value}`);
  }
  const head = encoder.encode(lines.map((l) => `${l}\n`).join(''));
  const out = new Uint8Array(head.length + r.value.length);
  out.set(head, 0);
  out.set(r.value, head.length);
  return out;
}

/** The `trustmsg-signature` header: `v1,<base64 HMAC-SHA256(key, signing input)>`. */
export function signSubmit(secret: string, r: SubmitFields): string {
  return `v1,${createHmac('sha256', signingKey(secret)).update(submitSigningInput(r)).digest('base64')}`;
}

/**
 * The record that submits `r`, signed: keyed by the message key; the
 * contract headers, then the other headers in byte order, then the signature.
 */
export function submitRecord(secret: string, r: SubmitFields): SubmitRecord {
  const signature = signSubmit(secret, r);
  const headers: Array<[string, string]> = [
    ['trustmsg-op', r.op],
    ['trustmsg-biz-id', r.biz_id],
    ['trustmsg-message-key', r.message_key],
  ];
  if (r.op === 'prepare') {
    headers.push(['trustmsg-topic', r.topic]);
    if (r.key !== null) headers.push(['trustmsg-key', r.key]);
  }
  for (const name of byteOrder(Object.keys(r.headers))) headers.push([name, r.headers[name] ?? '']);
  headers.push(['trustmsg-signature', signature]);
  return { key: r.message_key, value: r.value, headers };
}
