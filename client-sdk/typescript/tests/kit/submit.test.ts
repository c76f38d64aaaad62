// The Kafka way in under the kit's default broker, librdkafka's mock cluster.
//
// The Submitter's default transport is @platformatic/kafka, which the mock
// cannot serve: @platformatic/kafka opens with ApiVersions v3 and does not
// retry lower when the mock answers UNSUPPORTED_VERSION (the last test here
// holds that finding), and its lowest FindCoordinator (v4) and OffsetFetch
// (v8) are above the mock's (v3, v6) too. So S08's delivery runs on a real
// Kafka broker (tests/real-kafka/, under kit run --real-kafka), through the
// default transport; here, the signing vectors and the mock's refusal.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NotAcknowledgedError, signSubmit, submitRecord, type SubmitFields } from '../../src/index.js';
import { Submitter } from '../../src/kafka.js';
import { vectors } from '../vectors.js';
import { kit, quiet, rand, register } from '../kit.js';

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

const onRealKafka = process.env['TRUSTMSG_KIT_KAFKA_REAL'] === '1';

test(
  "the default transport (@platformatic/kafka) is refused by the kit's mock broker at ApiVersions v3",
  { skip: onRealKafka && 'a real broker: no mock to hold' },
  async () => {
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
  },
);
