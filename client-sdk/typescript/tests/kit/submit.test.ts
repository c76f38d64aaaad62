// S08: the Kafka way in against the real binary.
//
// The Submitter's default transport is @platformatic/kafka, which the kit's
// broker (librdkafka's mock cluster) refuses: its first request is
// ApiVersions v3, the mock answers only v0-v2 (error 35,
// UNSUPPORTED_VERSION) and @platformatic/kafka does not fall back to a lower
// version (KIP-511); its lowest FindCoordinator (v4) and OffsetFetch (v8)
// are above the mock's too (v3, v6). The last test here holds that finding.
// So S08 sends the Submitter's records through a transport on KafkaJS, which
// negotiates down to what the mock speaks: everything of the SDK but the
// default transport runs against the real service.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { NotAcknowledgedError, signSubmit, submitRecord, type SubmitFields } from '../../src/index.js';
import { Submitter, type SubmitTransport } from '../../src/kafka.js';
import { vectors } from '../vectors.js';
import { kit, ofMessage, producerFor, quiet, rand, readTopic, recordHeaders, recordKey, recordValue, register, viewWhen } from '../kit.js';

/**
 * A transport on KafkaJS, for the mock broker only. acks=all; not idempotent:
 * KafkaJS's InitProducerId fails against the mock ("Broker 0 not found in the
 * cached metadata": the mock's Metadata names controller 0, its only broker is 1).
 */
async function kafkajsTransport(): Promise<SubmitTransport> {
  const kafka = new Kafka({ clientId: 'ts-s08', brokers: [kit.kafka], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  return {
    async send(topic, record) {
      const [meta] = await producer.send({
        topic,
        acks: -1,
        messages: [{ key: record.key, value: Buffer.from(record.value), headers: Object.fromEntries(record.headers) }],
      });
      return { partition: meta!.partition, offset: BigInt(meta!.baseOffset ?? '-1') };
    },
    close: () => producer.disconnect(),
  };
}

test('S08 the Kafka way in delivers', async () => {
  const r = await register(`ts-s08-${rand()}`, 'http://127.0.0.1:9/unused');
  const submitter = new Submitter({ transport: await kafkajsTransport(), topic: kit.submitTopic, bizId: r.bizId, secret: r.secret, logger: quiet });
  try {
    const topic = `ts-s08-${rand()}`;
    const key = `order-${rand()}`;
    const payload = new Uint8Array([0, 1, 0xfe, 0xff, 0x41]);
    const prepared = await submitter.prepare({ message_key: key, topic, key: 'customer-7', payload, headers: { source: 'orders', Zeta: 'upper' } });
    assert.ok(prepared.offset >= 0n);
    await submitter.commit(key);
    const p = producerFor(r);
    const view = await viewWhen(p, key, (v) => v.status === 'COMMITTED');
    const records = await readTopic(topic, (rs) => ofMessage(rs, key).length > 0);
    const rec = ofMessage(records, key);
    assert.equal(rec.length, 1);
    assert.deepEqual(recordKey(rec[0]!), Buffer.from('customer-7'));
    assert.deepEqual(recordValue(rec[0]!), Buffer.from(payload));
    const headers = recordHeaders(rec[0]!);
    assert.ok(headers.some(([k, v]) => k === 'source' && v === 'orders'));
    assert.ok(headers.some(([k, v]) => k === 'Zeta' && v === 'upper'));
    assert.ok(headers.some(([k, v]) => k === 'trustmsg-message-id' && v === view.id.toString()));
    assert.ok(!headers.some(([k]) => k === 'trustmsg-signature' || k === 'trustmsg-op'), 'the submit headers are not delivered');

    // A rollback through the same way in.
    const key2 = `order-${rand()}`;
    const result = await submitter
      .transaction({ message_key: key2, topic, payload: 'x' }, async () => {
        throw new RangeError('out of stock');
      })
      .catch((e: unknown) => e);
    assert.ok(result instanceof RangeError);
    await viewWhen(p, key2, (v) => v.status === 'ROLLED_BACK');
  } finally {
    await submitter.close();
  }
});

test('S08 every case of submit-records.json signs to the same bytes', () => {
  const v = vectors<{ secret: string; cases: Array<SubmitFields & { value_base64: string; signature: string; record: { headers: Array<[string, string]> } }> }>(
    'submit-records.json',
  );
  for (const c of v.cases) {
    const f: SubmitFields = {
      op: c.op,
      biz_id: c.biz_id,
      message_key: c.message_key,
      topic: c.topic,
      key: c.key,
      headers: c.headers,
      value: new Uint8Array(Buffer.from(c.value_base64, 'base64')),
    };
    assert.equal(signSubmit(v.secret, f), c.signature);
    assert.deepEqual(submitRecord(v.secret, f).headers, c.record.headers);
  }
});

test("the default transport (@platformatic/kafka) is refused by the kit's mock broker at ApiVersions v3", async () => {
  const r = await register(`ts-s08p-${rand()}`, 'http://127.0.0.1:9/unused');
  const submitter = new Submitter({ brokers: kit.kafka, topic: kit.submitTopic, bizId: r.bizId, secret: r.secret, ackTimeoutMs: 15_000, logger: quiet });
  try {
    await assert.rejects(submitter.commit(`order-${rand()}`), (e: unknown) => {
      assert.ok(e instanceof NotAcknowledgedError);
      const cause = (e as { cause?: { message?: string; errors?: Array<{ apiCode?: number }> } }).cause;
      assert.match(cause?.message ?? '', /ApiVersions\(v3\)/);
      assert.equal(cause?.errors?.[0]?.apiCode, 35, 'UNSUPPORTED_VERSION');
      return true;
    });
  } finally {
    await submitter.close();
  }
});
