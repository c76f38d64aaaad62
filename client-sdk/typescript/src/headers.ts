/**
 * What a consumer reads from the records trustmsg delivers: the
 * `trustmsg-message-id` header, the same for every delivery of one message,
 * which the inbox keys on.
 */

/** The header every record trustmsg delivers carries. */
export const MESSAGE_ID_HEADER = 'trustmsg-message-id';
const U64_MAX = 18446744073709551615n;

type HeaderValue = string | Uint8Array | null | undefined;
/** Record headers as Kafka clients give them: a `Map`, a list of pairs, or an object. */
export type RecordHeaders =
  ReadonlyMap<string | Uint8Array, HeaderValue> | Iterable<readonly [string | Uint8Array, HeaderValue]> | Readonly<Record<string, HeaderValue>>;

function text(v: string | Uint8Array): string {
  return typeof v === 'string' ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('utf8');
}

function entries(headers: RecordHeaders): Iterable<readonly [string | Uint8Array, HeaderValue]> {
  if (headers instanceof Map) return headers.entries();
  if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') return headers as Iterable<readonly [string | Uint8Array, HeaderValue]>;
  return Object.entries(headers as Record<string, HeaderValue>);
}

/**
 * The `trustmsg-message-id` of a record (an unsigned 64-bit integer), or
 * null when it has none usable: then the record is not trustmsg's, and the
 * inbox refuses it rather than process it unkeyed.
 */
export function messageIdOf(headers: RecordHeaders | null | undefined): bigint | null {
  if (headers === null || headers === undefined) return null;
  for (const [name, value] of entries(headers)) {
    if (text(name) !== MESSAGE_ID_HEADER) continue;
    if (value === null || value === undefined) return null;
    const v = text(value);
    if (!/^[0-9]{1,20}$/.test(v)) return null;
    const id = BigInt(v);
    return id <= U64_MAX ? id : null;
  }
  return null;
}
