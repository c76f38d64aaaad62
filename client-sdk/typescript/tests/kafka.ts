// What the tests of the Kafka way share, on a real Kafka broker (client-sdk/
// conformance/kit run --real-kafka) and on the kit's and `trustmsg dev`'s mock
// broker: reading topics with @platformatic/kafka consumer groups, the way an
// application reads what trustmsg delivers.
import {
  Connection,
  Consumer,
  describeProducersV0,
  MessagesStreamFallbackModes,
  MessagesStreamModes,
  type Message,
  type MessagesStream,
} from '@platformatic/kafka';
import { kit } from './kit.js';

/** Throws unless the kit gave a real broker: these tests must not pass by not running. */
export function requireRealKafka(): void {
  if (process.env['TRUSTMSG_KIT_KAFKA_REAL'] !== '1') {
    throw new Error('these tests need a real Kafka broker: run them under client-sdk/conformance/kit run --real-kafka -- …');
  }
}

type Record = Message;

/**
 * A member of consumer group `group` reading `topic` from the group's
 * committed offset (the earliest when it has none), committing nothing by
 * itself: a record's offset is committed by `record.commit()`.
 */
export class GroupReader {
  readonly #consumer: Consumer;
  readonly #stream: MessagesStream<Buffer, Buffer, Buffer, Buffer>;
  readonly #records: AsyncIterator<Record>;

  private constructor(consumer: Consumer, stream: MessagesStream<Buffer, Buffer, Buffer, Buffer>) {
    this.#consumer = consumer;
    this.#stream = stream;
    this.#records = stream[Symbol.asyncIterator]();
  }

  static async open(group: string, topic: string, brokers: string = kit.kafka): Promise<GroupReader> {
    const consumer = new Consumer({ groupId: group, clientId: `ts-${group}`, bootstrapBrokers: [brokers], maxWaitTime: 500, sessionTimeout: 10_000 });
    try {
      const stream = await consumer.consume({
        topics: [topic],
        mode: MessagesStreamModes.COMMITTED,
        fallbackMode: MessagesStreamFallbackModes.EARLIEST,
        autocommit: false,
      });
      return new GroupReader(consumer, stream);
    } catch (e) {
      await consumer.close();
      throw e;
    }
  }

  /** The next record, or an error when none comes within `timeoutMs`. */
  async next(timeoutMs = 30_000): Promise<Record> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`no record within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    try {
      const r = await Promise.race([this.#records.next(), late]);
      if (r.done) throw new Error('the consumer stream ended');
      return r.value;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Records until `done` holds for one of them; returns that one. */
  async until(done: (r: Record) => boolean, timeoutMs = 30_000): Promise<Record> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await this.next(Math.max(1, deadline - Date.now()));
      if (done(r)) return r;
    }
  }

  /** Leaves the group (what a process that stops does), committing nothing. */
  async close(): Promise<void> {
    await this.#stream.close();
    await this.#consumer.close();
  }
}

/** A record's headers as text pairs, in order. */
export function headerPairs(r: Record): Array<[string, string]> {
  return [...r.headers].map(([k, v]) => [k.toString('utf8'), v.toString('utf8')]);
}

/** The record's header `name`, or undefined. */
export function header(r: Record, name: string): string | undefined {
  return headerPairs(r).find(([k]) => k === name)?.[1];
}

/**
 * The producers the broker tracks on `topic`'s partition (DescribeProducers,
 * KIP-664): only idempotent or transactional producers have an id and
 * sequence numbers there.
 */
export async function activeProducers(topic: string, partition: number): Promise<Array<{ producerId: bigint; lastSequence: number; lastTimestamp: bigint }>> {
  const [host, port] = kit.kafka.split(':');
  const connection = new Connection('ts-describe-producers');
  await connection.connect(host ?? '127.0.0.1', Number(port));
  try {
    const answer = await describeProducersV0.api.async(connection, [{ name: topic, partitionIndexes: [partition] }]);
    const p = answer.topics[0]?.partitions[0];
    if (!p || p.errorCode !== 0) throw new Error(`DescribeProducers ${topic}/${partition}: error ${p?.errorCode} ${p?.errorMessage ?? ''}`);
    return p.activeProducers;
  } finally {
    await connection.close();
  }
}
