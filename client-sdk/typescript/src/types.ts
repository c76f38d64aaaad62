/**
 * The shapes the SDK takes and gives. Wire-shaped data keeps the HTTP API's
 * field names (`message_key`, `send_status`, …), as the API documents them;
 * the SDK's own options are camelCase.
 */

/** A message to prepare (or to enqueue in the local message table). */
export interface Message {
  /** The producer's unique key for the message, e.g. an order id: 1 to 128 bytes of UTF-8, no control characters. */
  message_key: string;
  /** The Kafka topic to deliver to (one of the producer's registered topics). */
  topic: string;
  /** The record value: a string is sent as its UTF-8 bytes, a `Uint8Array` byte for byte. */
  payload: string | Uint8Array;
  /** The Kafka record key; without one, Kafka's default partitioner picks. */
  key?: string | undefined;
  /** Record headers (names starting with `trustmsg-` are reserved). */
  headers?: Readonly<Record<string, string>> | undefined;
  /** Deliver no earlier than this many milliseconds after the prepare (0 to 7 days). Not with `deliver_at`. */
  deliver_after_ms?: number | undefined;
  /** Deliver no earlier than this time (at most 7 days ahead). Not with `deliver_after_ms`. */
  deliver_at?: Date | undefined;
  /**
   * The W3C trace context to prepare under. Without it, the active
   * OpenTelemetry span's (when `@opentelemetry/api` is installed).
   */
  traceparent?: string | undefined;
  /** The W3C trace state, sent with `traceparent`. */
  tracestate?: string | undefined;
}

/** The decision state of a message. */
export type MessageStatus = 'PREPARED' | 'COMMITTED' | 'ROLLED_BACK' | 'VERIFY_FAILED';
/** The delivery state of a committed message. */
export type SendStatus = 'PENDING' | 'SENT' | 'SEND_FAILED';

/** A message as the API shows it (`GET /v1/messages/{biz_id}/{message_key}`). */
export interface MessageView {
  /** trustmsg's id for the message (unsigned 64-bit); also the `trustmsg-message-id` record header. */
  id: bigint;
  biz_id: string;
  message_key: string;
  status: MessageStatus;
  /** The delivery state; null before commit. */
  send_status: SendStatus | null;
  topic: string | null;
  key: string | null;
  payload_size: number;
  verify_attempts: number;
  send_attempts: number;
  created_at: string;
  updated_at: string;
  decided_at?: string | null;
  deliver_at?: string | null;
  sent_at?: string | null;
  kafka_partition?: number | null;
  kafka_offset?: number | null;
  last_error?: string | null;
  trace_id?: string | null;
  /** Fields the service adds later are kept as they come. */
  [field: string]: unknown;
}

/** A check-back decision. */
export type Decision = 'commit' | 'rollback' | 'unknown';

/** A verified check-back call. Unknown fields of the body are ignored. */
export interface CheckRequest {
  biz_id: string;
  message_key: string;
  /** trustmsg's id for the message: the answer echoes it. */
  message_id: bigint;
  /** 1 for the first check-back of this message, then 2, 3, … */
  attempt: number;
  /** When prepare stored the message (RFC 3339, UTC). */
  prepared_at: string;
}

/** Options every call takes. */
export interface CallOptions {
  /** Gives the call up (with {@link UserAbortError}) when it fires, retries and backoff included. */
  signal?: AbortSignal | undefined;
}

export type { Logger, AnyLogger } from './logger.js';
