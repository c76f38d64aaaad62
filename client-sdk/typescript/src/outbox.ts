/**
 * The local message table's row for a message (docs/outbox.md): publish
 * through trustmsg with one INSERT in the producer's own transaction, no call
 * on the request path. `enqueue` of `@trustmsg/client/mysql` and
 * `@trustmsg/client/postgres` writes it.
 *
 * A row trustmsg would refuse is marked failed by the relay only after the
 * business change committed, so what the SDK can tell is refused here,
 * before anything is written, with the HTTP API's error code
 * ({@link BadRequestError}): the message key, topic, record key, headers and
 * delivery time. What only the service knows (the payload limit, the
 * producer's topic allow-list) is checked when the row is relayed.
 */
import { ConfigError } from './errors.js';
import { checkDue, checkHeaders, checkMessageKey, checkRecordKey, checkShape, checkTopic, normalizeTraceparent, payloadBytes, type Due } from './message.js';
import { activeTraceHeaders } from './trace.js';
import type { Message } from './types.js';

/** The table's name unless one is chosen (`--outbox-table` of `trustmsg serve`). */
export const OUTBOX_TABLE = 'trustmsg_outbox';

/** The columns `enqueue` writes; every other column keeps its default. */
export interface OutboxRow {
  message_key: string;
  topic: string;
  record_key: string | null;
  payload: Uint8Array;
  /** A JSON object of strings; null without headers. */
  headers: string | null;
  /** A valid traceparent as trustmsg stores it; an invalid one is left out, not refused. */
  traceparent: string | null;
  /** When it may be sent: at a time, or a delay counted from the INSERT by the database's clock. */
  due: Due;
}

/**
 * The row of `message`, or the refusal trustmsg would give it
 * ({@link BadRequestError} with the API's code). `traceparent` is the
 * message's own, else the active OpenTelemetry span's when given in
 * `activeTraceparent`. The table has no `tracestate` column.
 */
export function outboxRow(message: Message, now: Date = new Date(), activeTraceparent?: string): OutboxRow {
  checkShape(message);
  checkMessageKey(message.message_key);
  checkTopic(message.topic);
  checkRecordKey(message.key);
  checkHeaders(message.headers);
  const headers =
    message.headers && Object.keys(message.headers).length > 0 ? JSON.stringify(Object.fromEntries(Object.entries(message.headers).sort())) : null;
  return {
    message_key: message.message_key,
    topic: message.topic,
    record_key: message.key ?? null,
    payload: payloadBytes(message.payload),
    headers,
    traceparent: normalizeTraceparent(message.traceparent ?? activeTraceparent),
    due: checkDue(message, now),
  };
}

/** {@link outboxRow} with the active OpenTelemetry span's traceparent when the message has none. */
export async function outboxRowWithTrace(message: Message): Promise<OutboxRow> {
  const active = message.traceparent === undefined ? (await activeTraceHeaders())['traceparent'] : undefined;
  return outboxRow(message, new Date(), active);
}

/** A table name the relay can use unquoted: 1 to 64 of `A-Z a-z 0-9 _`, not starting with a digit. */
export function checkTable(name: string): void {
  if (typeof name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(name)) {
    throw new ConfigError(`outbox table ${JSON.stringify(name)} is not 1 to 64 of A-Z a-z 0-9 _ (not starting with a digit)`, { code: 'invalid_table' });
  }
}
