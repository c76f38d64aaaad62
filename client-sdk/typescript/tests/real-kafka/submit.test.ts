// S08 on a real Kafka broker (kit run --real-kafka): the Submitter through
// its default transport, @platformatic/kafka, as an application runs it,
// with what the kit's mock broker cannot show (tests/kit/submit.test.ts runs
// S08 there): DescribeProducers, 40 records submitted at once.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { submitRecord } from '../../src/index.js';
import { Submitter } from '../../src/kafka.js';
import { activeProducers, GroupReader, header, headerPairs, requireRealKafka } from '../kafka.js';
import { kit, producerFor, quiet, rand, register, viewWhen } from '../kit.js';

before(requireRealKafka);

test('S08 the Kafka way in delivers through the default transport (@platformatic/kafka) on a real broker', async () => {
  const r = await register(`ts-s08r-${rand()}`, 'http://127.0.0.1:9/unused');
  const submitter = new Submitter({ brokers: kit.kafka, topic: kit.submitTopic, bizId: r.bizId, secret: r.secret, logger: quiet });
  const topic = `ts-s08r-${rand()}`;
  const key = `order-${rand()}`;
  const payload = new Uint8Array([0, 1, 0xfe, 0xff, 0x41, 0x0a]);
  const userHeaders = { source: 'orders', Zeta: 'upper', note: 'café ✓' };
  let prepared, committed;
  try {
    prepared = await submitter.prepare({ message_key: key, topic, key: 'customer-7', payload, headers: userHeaders });
    committed = await submitter.commit(key);
  } finally {
    await submitter.close();
  }
  assert.equal(committed.partition, prepared.partition, "a message's records share its key's partition");
  assert.ok(committed.offset > prepared.offset, `commit at ${committed.offset} after prepare at ${prepared.offset}`);

  // trustmsg applied both and delivered the record byte for byte.
  const p = producerFor(r);
  const view = await viewWhen(p, key, (v) => v.status === 'COMMITTED' && v.send_status === 'SENT');
  const target = await GroupReader.open(`ts-s08r-${rand()}`, topic);
  try {
    const rec = await target.next();
    assert.deepEqual(rec.key, Buffer.from('customer-7'));
    assert.deepEqual(rec.value, Buffer.from(payload));
    const headers = headerPairs(rec);
    for (const [k, v] of Object.entries(userHeaders))
      assert.ok(
        headers.some(([hk, hv]) => hk === k && hv === v),
        `header ${k}: ${JSON.stringify(headers)}`,
      );
    assert.equal(header(rec, 'trustmsg-message-id'), view.id.toString());
    assert.ok(!headers.some(([k]) => k === 'trustmsg-signature' || k === 'trustmsg-op'), 'the submit headers are not delivered');
  } finally {
    await target.close();
  }

  // The submit topic holds exactly the signed records, where the Submitter said.
  const submits = await GroupReader.open(`ts-s08r-submit-${rand()}`, kit.submitTopic);
  try {
    const mine = (r2: { headers: Map<Buffer, Buffer> }, op: string): boolean =>
      [...r2.headers].some(([k, v]) => k.toString() === 'trustmsg-message-key' && v.toString() === key) &&
      [...r2.headers].some(([k, v]) => k.toString() === 'trustmsg-op' && v.toString() === op);
    const prep = await submits.until((m) => mine(m, 'prepare'));
    const fields = { biz_id: r.bizId, message_key: key };
    const expected = submitRecord(r.secret, { ...fields, op: 'prepare', topic, key: 'customer-7', headers: userHeaders, value: payload });
    assert.deepEqual([prep.partition, prep.offset], [prepared.partition, prepared.offset]);
    assert.deepEqual(prep.key, Buffer.from(key));
    assert.deepEqual(prep.value, Buffer.from(payload));
    assert.deepEqual(headerPairs(prep), expected.headers, 'the signed headers, in order, byte for byte');
    const commit = await submits.until((m) => mine(m, 'commit'));
    assert.deepEqual([commit.partition, commit.offset], [committed.partition, committed.offset]);
    assert.deepEqual(commit.value, Buffer.alloc(0));
    assert.deepEqual(
      headerPairs(commit),
      submitRecord(r.secret, { ...fields, op: 'commit', topic: '', key: null, headers: {}, value: new Uint8Array() }).headers,
    );

    // Written by an idempotent producer: the broker keeps its id and sequence for the partition.
    const producers = await activeProducers(kit.submitTopic, committed.partition);
    const ours = producers.find((x) => x.lastTimestamp === commit.timestamp);
    assert.ok(ours, `an idempotent producer wrote the commit (${JSON.stringify(producers, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))})`);
    assert.ok(ours.producerId >= 0n && ours.lastSequence >= 1, 'its prepare and commit were sequenced');
  } finally {
    await submits.close();
  }

  // A rollback through the same way in.
  const again = new Submitter({ brokers: kit.kafka, topic: kit.submitTopic, bizId: r.bizId, secret: r.secret, logger: quiet });
  try {
    const key2 = `order-${rand()}`;
    const outcome = await again
      .transaction({ message_key: key2, topic, payload: 'x' }, async () => {
        throw new RangeError('out of stock');
      })
      .catch((e: unknown) => e);
    assert.ok(outcome instanceof RangeError);
    await viewWhen(p, key2, (v) => v.status === 'ROLLED_BACK');
  } finally {
    await again.close();
  }
});

test('S08 records submitted at once are each written once, at the offsets the Submitter gives', async () => {
  const r = await register(`ts-s08c-${rand()}`, 'http://127.0.0.1:9/unused');
  const submitter = new Submitter({ brokers: kit.kafka, topic: kit.submitTopic, bizId: r.bizId, secret: r.secret, logger: quiet });
  const topic = `ts-s08c-${rand()}`;
  const keys = Array.from({ length: 40 }, (_, i) => `order-${i}-${rand()}`);
  let at;
  try {
    at = await Promise.all(keys.map((k, i) => submitter.prepare({ message_key: k, topic, payload: `{"n":${i}}` })));
  } finally {
    await submitter.close();
  }
  const places = at.map((a) => `${a.partition}:${a.offset}`);
  assert.equal(new Set(places).size, keys.length, `one offset per record: ${places.join(' ')}`);

  // Each record is in Kafka where the Submitter said, and trustmsg applied every one.
  const submits = await GroupReader.open(`ts-s08c-submit-${rand()}`, kit.submitTopic);
  const seen = new Map<string, string>();
  try {
    await submits.until((m) => {
      if (header(m, 'trustmsg-biz-id') === r.bizId) {
        const k = header(m, 'trustmsg-message-key') ?? '';
        assert.ok(!seen.has(k), `${k} written twice`);
        seen.set(k, `${m.partition}:${m.offset}`);
      }
      return seen.size === keys.length;
    });
  } finally {
    await submits.close();
  }
  keys.forEach((k, i) => {
    assert.equal(seen.get(k), places[i], k);
  });
  const p = producerFor(r);
  for (const k of keys) await viewWhen(p, k, (v) => v.status === 'PREPARED');
});
