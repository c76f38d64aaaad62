// The Kafka way in under the kit's default broker, librdkafka's mock cluster
// (the broker of `trustmsg dev`): the signing vectors, and S08 through the
// Submitter's default transport, @platformatic/kafka 2.x, read back with a
// @platformatic/kafka consumer group. (1.x could not: it opened with
// ApiVersions v3 and did not retry lower when the mock answered
// UNSUPPORTED_VERSION.) The transport's idempotent producer asks
// InitProducerId for (-1, -1), "no producer yet", which the mock requires.
// The run on a real broker (tests/real-kafka/) adds what the mock cannot
// show: DescribeProducers, 40 records at once, a group's redelivery.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { signSubmit, submitRecord, type SubmitFields } from '../../src/index.js';
import { Submitter } from '../../src/kafka.js';
import { vectors } from '../vectors.js';
import { GroupReader, header } from '../kafka.js';
import { kit, producerFor, quiet, rand, register, viewWhen } from '../kit.js';

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

test('S08 the Kafka way in delivers through the default transport (@platformatic/kafka) on the mock broker', async () => {
  const r = await register(`ts-s08m-${rand()}`, 'http://127.0.0.1:9/unused');
  const submitter = new Submitter({ brokers: kit.kafka, topic: kit.submitTopic, bizId: r.bizId, secret: r.secret, ackTimeoutMs: 15_000, logger: quiet });
  const topic = `ts-s08m-${rand()}`;
  const key = `order-${rand()}`;
  const payload = new Uint8Array([0, 1, 0xfe, 0xff, 0x41]);
  let prepared, committed;
  try {
    prepared = await submitter.prepare({ message_key: key, topic, key: 'customer-7', payload, headers: { source: 'orders' } });
    committed = await submitter.commit(key);
  } finally {
    await submitter.close();
  }
  assert.equal(committed.partition, prepared.partition, "a message's records share its key's partition");
  assert.ok(committed.offset > prepared.offset, `commit at ${committed.offset} after prepare at ${prepared.offset}`);
  const view = await viewWhen(producerFor(r), key, (v) => v.status === 'COMMITTED' && v.send_status === 'SENT');
  const reader = await GroupReader.open(`ts-s08m-${rand()}`, topic);
  try {
    const rec = await reader.next();
    assert.deepEqual(rec.key, Buffer.from('customer-7'));
    assert.deepEqual(rec.value, Buffer.from(payload));
    assert.equal(header(rec, 'trustmsg-message-id'), view.id.toString());
    assert.equal(header(rec, 'source'), 'orders');
  } finally {
    await reader.close();
  }
});
