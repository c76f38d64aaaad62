/**
 * The Kafka way in (docs/kafka-submit.md), on `@platformatic/kafka` (a
 * maintained, pure-JavaScript Kafka client: no native addon, nothing
 * downloaded at install): prepare, commit and rollback submitted as signed
 * records to trustmsg's submit topic, by an idempotent producer with
 * `acks=all`.
 *
 * What a {@link Submitter} guarantees, and what it cannot:
 *
 * - Each call produces **one** record keyed by the message key, so every
 *   operation of one message lands on one partition, in order.
 * - A call resolves once Kafka has **acknowledged** the record (every
 *   in-sync replica has it). Acknowledged means durable in Kafka, *not*
 *   applied by trustmsg: what trustmsg cannot apply goes to the dead-letter
 *   topic `<submit topic>.dlq`. A message whose decision was dead-lettered
 *   stays PREPARED until check-back asks, which is why a producer on this
 *   way in must answer check-back (the barrier does).
 * - A record Kafka does not acknowledge in time is a
 *   {@link NotAcknowledgedError}; it may still have been written, and every
 *   operation is idempotent in trustmsg, so submitting it again is safe.
 * - What the record signature cannot express (a line break, an `=` in a
 *   header name) and what trustmsg would refuse are refused here, before
 *   anything is sent, as {@link BadRequestError} with the HTTP API's code.
 */
import type { Producer as KafkaProducer, ProducerOptions } from '@platformatic/kafka';
import { signingKey } from './checkback.js';
import { ConfigError, NotAcknowledgedError, UserAbortError } from './errors.js';
import { checkDue, checkHeaders, checkMessageKey, checkRecordKey, checkShape, checkTopic, payloadBytes } from './message.js';
import { submitRecord, type SubmitFields, type SubmitOp, type SubmitRecord } from './submit.js';
import { traceHeaders } from './trace.js';
import { runTransaction, type TransactionOptions, type TransactionResult } from './transaction.js';
import { toLogger, type AnyLogger, type Logger } from './logger.js';
import type { CallOptions, Message } from './types.js';

export { messageIdOf, MESSAGE_ID_HEADER } from './headers.js';

/** Where an acknowledged record is in the submit topic: durable in Kafka, not yet applied by trustmsg. */
export interface Submitted {
  partition: number;
  offset: bigint;
}

/** Kafka settings the Submitter owns: changing them would break what it promises. */
const RESERVED = ['bootstrapBrokers', 'idempotent', 'acks', 'transactionalId', 'serializers', 'producerId', 'producerEpoch'] as const;

/** `@platformatic/kafka` producer settings the Submitter leaves to the application (TLS, SASL, timeouts, retries). */
export type KafkaSettings = Omit<ProducerOptions<Buffer, Buffer, Buffer, Buffer>, (typeof RESERVED)[number] | 'clientId'>;

/**
 * A Kafka producer the {@link Submitter} sends its records through:
 * idempotent, `acks=all`. `send` is called again before earlier calls
 * resolved (one per operation the application runs at once): each record
 * must be written once.
 */
export interface SubmitTransport {
  /** Produces `record` to `topic`; resolves once Kafka acknowledged it, with where it was written. */
  send(topic: string, record: SubmitRecord): Promise<Submitted>;
  close(): Promise<void>;
}

/** Settings of {@link platformaticTransport}. */
export interface PlatformaticTransportOptions {
  /** The Kafka bootstrap brokers: `host:port`, several comma-separated or as a list. */
  brokers: string | readonly string[];
  clientId: string;
  /** More producer settings; brokers, `idempotent` and `acks` are the transport's own and refused here. */
  kafka?: KafkaSettings | undefined;
}

/**
 * Records coalesced into one produce request while another is in flight,
 * at most this many bytes (keys, values, headers): under the broker's
 * default `message.max.bytes` (1 MiB per partition's batch). A larger
 * record goes alone.
 */
const MAX_BATCH_BYTES = 512 * 1024;

interface Queued {
  topic: string;
  record: SubmitRecord;
  bytes: number;
  resolve: (at: Submitted) => void;
  reject: (error: unknown) => void;
}

function recordBytes(record: SubmitRecord): number {
  let n = Buffer.byteLength(record.key, 'utf8') + record.value.byteLength;
  for (const [k, v] of record.headers) n += Buffer.byteLength(k, 'utf8') + Buffer.byteLength(v, 'utf8');
  return n;
}

/**
 * The default transport: a `@platformatic/kafka` producer with
 * `idempotent: true` and `acks: ProduceAcks.ALL` (no duplicates from its own
 * retries, written to every in-sync replica), whatever else `kafka` sets.
 *
 * One produce request at a time: what is sent while one is in flight waits
 * and goes, in call order, in the next one. `@platformatic/kafka` (1.35)
 * numbers an idempotent producer's records when it builds a request and
 * counts them only once the request is answered, so requests sent at once
 * carried the same sequence numbers, and the broker took all but the first
 * for retries of it: it acknowledged them, at the first one's offset, and
 * dropped them (7 of 10 concurrent prepares were lost against a real
 * Kafka 4.4; upstream: github.com/platformatic/kafka/issues/326, seen on
 * 2.1.0 too). Records are partitioned here as Java's kafka-clients does
 * (murmur2 of the key, positive, modulo the partition count), so that each
 * record's offset is known from its partition's base offset.
 */
export function platformaticTransport(options: PlatformaticTransportOptions): SubmitTransport {
  const brokers = typeof options.brokers === 'string' ? options.brokers.split(',') : [...options.brokers];
  const list = brokers.map((b) => b.trim()).filter((b) => b !== '');
  if (list.length === 0) throw new ConfigError('brokers is required: host:port of the Kafka bootstrap brokers');
  const extra = options.kafka ?? {};
  for (const name of RESERVED) {
    if (name in extra) throw new ConfigError(`Kafka setting ${name} is the Submitter's own (brokers, idempotent producer, acks=all)`);
  }
  // Loaded on first use: with a transport of its own, an application need not install @platformatic/kafka.
  let kafka: Promise<typeof import('@platformatic/kafka')> | undefined;
  let producer: Promise<KafkaProducer> | undefined;
  const load = (): Promise<typeof import('@platformatic/kafka')> => (kafka ??= import('@platformatic/kafka'));
  const connect = (): Promise<KafkaProducer> =>
    (producer ??= load().then(
      ({ Producer, ProduceAcks }) =>
        new Producer({
          ...extra,
          clientId: options.clientId,
          bootstrapBrokers: list,
          idempotent: true,
          acks: ProduceAcks.ALL,
          // InitProducerId's "no producer yet" (-1, -1), as the protocol spells it: @platformatic/kafka
          // sends (0, 0) unless told, which Apache Kafka ignores for a non-transactional producer but
          // librdkafka's mock cluster (`trustmsg dev`'s broker) looks up and answers UNKNOWN_PRODUCER_ID.
          producerId: -1n,
          producerEpoch: -1,
        }),
    ));

  const queue: Queued[] = [];
  let sending = false;
  let closed = false;

  async function produce(batch: Queued[]): Promise<Submitted[]> {
    const [{ murmur2 }, client] = await Promise.all([load(), connect()]);
    const topics = [...new Set(batch.map((q) => q.topic))];
    const metadata = await client.metadata({ topics });
    const messages = batch.map(({ topic, record }) => {
      const key = Buffer.from(record.key, 'utf8');
      const count = metadata.topics.get(topic)?.partitionsCount ?? 0;
      if (count < 1) throw new Error(`Kafka has no partitions of topic ${topic}`);
      return {
        topic,
        partition: (murmur2(key) & 0x7fffffff) % count,
        key,
        value: Buffer.from(record.value),
        headers: new Map<Buffer, Buffer>(record.headers.map(([k, v]) => [Buffer.from(k, 'utf8'), Buffer.from(v, 'utf8')])),
      };
    });
    const result = await client.send({ messages });
    // Each partition's records went in call order, in one batch starting at its base offset.
    const base = new Map((result.offsets ?? []).map((o) => [`${o.topic}:${o.partition}`, o.offset]));
    const next = new Map<string, bigint>();
    return messages.map(({ topic, partition }) => {
      const at = `${topic}:${partition}`;
      const offset = next.get(at) ?? base.get(at);
      if (offset === undefined) throw new Error(`Kafka's answer has no offset for ${at}`);
      next.set(at, offset + 1n);
      return { partition, offset };
    });
  }

  async function pump(): Promise<void> {
    if (sending) return;
    sending = true;
    try {
      while (queue.length > 0) {
        let bytes = 0;
        let n = 0;
        while (n < queue.length && (n === 0 || bytes + (queue[n]?.bytes ?? 0) <= MAX_BATCH_BYTES)) bytes += queue[n++]?.bytes ?? 0;
        const batch = queue.splice(0, n);
        try {
          const at = await produce(batch);
          batch.forEach((q, i) => {
            q.resolve(at[i] ?? { partition: -1, offset: -1n });
          });
        } catch (e) {
          for (const q of batch) q.reject(e);
        }
      }
    } finally {
      sending = false;
    }
  }

  return {
    send(topic, record) {
      if (closed) return Promise.reject(new Error('the Kafka producer is closed'));
      return new Promise<Submitted>((resolve, reject) => {
        queue.push({ topic, record, bytes: recordBytes(record), resolve, reject });
        void pump();
      });
    },
    async close() {
      closed = true;
      for (const q of queue.splice(0)) q.reject(new Error('the Kafka producer was closed before this record was sent'));
      if (producer) await (await producer).close();
    },
  };
}

/** How a {@link Submitter} is set up. */
export interface SubmitterOptions {
  /**
   * The Kafka bootstrap brokers: `host:port`, several comma-separated or as
   * a list. Records go through {@link platformaticTransport}.
   */
  brokers?: string | readonly string[];
  /** Instead of `brokers`: the producer to send through; it must be idempotent with `acks=all`. */
  transport?: SubmitTransport;
  /** trustmsg's submit topic (`--submit-topic`; `trustmsg.submit` under `trustmsg dev`). */
  topic: string;
  /** The producer's id. */
  bizId: string;
  /** The producer's `signing_secret` (`whsec_…`) from its registration. */
  secret: string;
  /** The Kafka client id (default `trustmsg-<bizId>`). */
  clientId?: string;
  /** How long a call waits for Kafka's acknowledgement (default 30 000 ms). */
  ackTimeoutMs?: number;
  /** More `@platformatic/kafka` producer settings (with `brokers`): TLS (`tls`), SASL (`sasl`), timeouts, retries. */
  kafka?: KafkaSettings;
  /** Where warnings go: a pino logger (or any fields-first logger), else one JSON line per event on stderr. */
  logger?: AnyLogger | undefined;
}

/**
 * A producer that submits prepare, commit and rollback to trustmsg as signed
 * Kafka records. Close it when done.
 *
 * ```ts
 * const submitter = new Submitter({ brokers: 'kafka-1:9092', topic: 'trustmsg.submit', bizId: 'shop', secret });
 * await submitter.prepare({ message_key: 'order-42', topic: 'orders', payload: '{"order":42}' });
 * // … the local transaction …
 * await submitter.commit('order-42');
 * await submitter.close();
 * ```
 */
export class Submitter {
  readonly bizId: string;
  readonly topic: string;
  /** The logger as given (undefined: the default). */
  readonly logger: AnyLogger | undefined;
  readonly #log: Logger;
  readonly #secret: string;
  readonly #transport: SubmitTransport;
  readonly #ackTimeout: number;

  constructor(options: SubmitterOptions) {
    if (typeof options !== 'object' || options === null) throw new ConfigError('new Submitter({ brokers, topic, bizId, secret })');
    // A secret that cannot sign would fail every call; say so now.
    signingKey(options.secret);
    if (typeof options.topic !== 'string' || options.topic === '') throw new ConfigError("topic is required: trustmsg's submit topic");
    if (typeof options.bizId !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(options.bizId)) {
      throw new ConfigError(`bizId must be 1 to 64 of A-Z a-z 0-9 . _ - (got ${JSON.stringify(options.bizId)})`);
    }
    if ((options.brokers === undefined) === (options.transport === undefined)) {
      throw new ConfigError('give brokers (the Kafka bootstrap brokers) or a transport, one of them');
    }
    const ack = options.ackTimeoutMs ?? 30_000;
    if (!Number.isSafeInteger(ack) || ack <= 0) throw new ConfigError(`ackTimeoutMs must be a positive number of milliseconds (got ${ack})`);
    this.bizId = options.bizId;
    this.topic = options.topic;
    this.logger = options.logger;
    this.#log = toLogger(options.logger);
    this.#secret = options.secret;
    this.#ackTimeout = ack;
    this.#transport =
      options.transport ??
      platformaticTransport({ brokers: options.brokers ?? [], clientId: options.clientId ?? `trustmsg-${options.bizId}`, kafka: options.kafka });
  }
  /**
   * Submits the prepare of `message`: one record whose value is the
   * payload's bytes, whose headers are the message's headers plus its
   * delivery time and trace context, signed. Resolves once Kafka
   * acknowledged it.
   */
  async prepare(message: Message, options: CallOptions = {}): Promise<Submitted> {
    checkShape(message);
    checkMessageKey(message.message_key);
    checkTopic(message.topic);
    checkRecordKey(message.key);
    checkHeaders(message.headers);
    const due = checkDue(message, new Date());
    const headers: Record<string, string> = { ...message.headers };
    if (due && 'at' in due) headers['trustmsg-deliver-at'] = due.at.toISOString();
    if (due && 'afterMs' in due) headers['trustmsg-deliver-after-ms'] = String(due.afterMs);
    // The explicit trace context wins over a user header of that name.
    Object.assign(headers, await traceHeaders(message));
    return this.#send(
      {
        op: 'prepare',
        biz_id: this.bizId,
        message_key: message.message_key,
        topic: message.topic,
        key: message.key ?? null,
        headers,
        value: payloadBytes(message.payload),
      },
      options,
    );
  }

  /** Submits the commit of message `messageKey`. Resolves once Kafka acknowledged it. */
  commit(messageKey: string, options: CallOptions = {}): Promise<Submitted> {
    return this.#decide('commit', messageKey, options);
  }

  /** Submits the rollback of message `messageKey`. Resolves once Kafka acknowledged it. */
  rollback(messageKey: string, options: CallOptions = {}): Promise<Submitted> {
    return this.#decide('rollback', messageKey, options);
  }

  /** {@link runTransaction} through this way in. */
  transaction<T>(message: Message, local: (prepared: Submitted) => Promise<T>, options: TransactionOptions = {}): Promise<TransactionResult<T, Submitted>> {
    return runTransaction(this, message, local, { logger: this.logger, ...options });
  }

  /** Closes the Kafka connections. */
  async close(): Promise<void> {
    await this.#transport.close();
  }

  #decide(op: SubmitOp, messageKey: string, options: CallOptions): Promise<Submitted> {
    checkMessageKey(messageKey);
    return this.#send({ op, biz_id: this.bizId, message_key: messageKey, topic: '', key: null, headers: {}, value: new Uint8Array() }, options);
  }

  async #send(fields: SubmitFields, options: CallOptions): Promise<Submitted> {
    const record = submitRecord(this.#secret, fields);
    const signal = options.signal;
    if (signal?.aborted) throw new UserAbortError(signal.reason);
    const sent = this.#transport.send(this.topic, record);
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const stop = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new NotAcknowledgedError(`Kafka did not acknowledge the ${fields.op} record within ${this.#ackTimeout} ms`));
      }, this.#ackTimeout);
      onAbort = () => {
        reject(new UserAbortError(signal?.reason));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([sent, stop]);
    } catch (e) {
      if (e instanceof NotAcknowledgedError || e instanceof UserAbortError) throw e;
      this.#log.warn({ op: fields.op, messageKey: fields.message_key, topic: this.topic, error: String(e) }, 'submitted record not acknowledged');
      throw new NotAcknowledgedError(`Kafka did not acknowledge the ${fields.op} record: ${(e as Error).message}`, { cause: e });
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
      sent.catch(() => undefined);
    }
  }
}
