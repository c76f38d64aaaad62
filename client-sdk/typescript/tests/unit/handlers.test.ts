// Settings refused with what to do, and the handlers' answers outside the signature.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import express from 'express';
import type { AddressInfo } from 'node:net';
import { checkBackFetchHandler, ConfigError, createCheckBackHandler, signCheckBack } from '../../src/index.js';
import { checkBackExpress } from '../../src/express.js';
import { Submitter } from '../../src/kafka.js';

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const quiet = { warn: () => undefined, error: () => undefined };

test('the Submitter owns brokers, idempotence and acks, and refuses a secret that cannot sign', () => {
  const base = { topic: 'trustmsg.submit', bizId: 'shop', secret };
  assert.throws(() => new Submitter({ ...base, brokers: '127.0.0.1:9092', kafka: { acks: 1 } as never }), /acks is the Submitter's own/);
  assert.throws(() => new Submitter({ ...base, brokers: '127.0.0.1:9092', kafka: { idempotent: false } as never }), /idempotent/);
  assert.throws(() => new Submitter({ ...base, secret: 'not-a-secret', brokers: '127.0.0.1:9092' }), ConfigError);
  assert.throws(() => new Submitter({ ...base }), /brokers/);
  assert.throws(() => new Submitter({ ...base, brokers: ' , ' }), /brokers is required/);
  assert.doesNotThrow(() => new Submitter({ ...base, brokers: '127.0.0.1:9092,127.0.0.1:9093' }));
});

test('a handler refuses a secret that is not whsec_<base64> and a missing decider at start-up', () => {
  assert.throws(() => createCheckBackHandler({ secret: 'c2VjcmV0', decide: () => 'commit' }), /whsec_/);
  assert.throws(() => createCheckBackHandler({ secret: 'whsec_!!!', decide: () => 'commit' }), /base64/);
  assert.throws(() => createCheckBackHandler({ secret } as never), /decide is required/);
});

test('a decider that throws or answers nonsense is a 500 (trustmsg asks again), a bad body a 400', async () => {
  const body = '{"biz_id":"shop","message_key":"k","message_id":1,"attempt":1,"prepared_at":"2026-01-01T00:00:00Z"}';
  const ts = Math.floor(Date.now() / 1000);
  const headers = (b: string): Record<string, string> => ({
    'webhook-id': 'i',
    'webhook-timestamp': String(ts),
    'webhook-signature': signCheckBack(secret, 'i', ts, b),
  });
  const failing = createCheckBackHandler({
    secret,
    logger: quiet,
    decide: () => {
      throw new Error('database down');
    },
  });
  assert.equal((await failing(headers(body), body)).status, 500);
  const nonsense = createCheckBackHandler({ secret, logger: quiet, decide: () => 'maybe' as never });
  assert.equal((await nonsense(headers(body), body)).status, 500);
  const ok = createCheckBackHandler({ secret, logger: quiet, decide: () => 'unknown' });
  assert.equal((await ok(headers('[1]'), '[1]')).status, 400);
  assert.deepEqual(await ok(headers(body), body), { status: 200, body: '{"message_id":1,"decision":"unknown"}' });
  const fetchHandler = checkBackFetchHandler({ secret, logger: quiet, decide: () => 'commit' });
  assert.equal((await fetchHandler(new Request('http://x/trustmsg/check'))).status, 405);
  const big = 'x'.repeat(70 * 1024);
  assert.equal((await fetchHandler(new Request('http://x/trustmsg/check', { method: 'POST', body: big, headers: headers(big) }))).status, 413);
});

test('Express: a JSON parser mounted before the handler is named, not answered 401', async () => {
  const app = express();
  app.use(express.json({ type: '*/*' }));
  app.post('/trustmsg/check', checkBackExpress({ secret, logger: quiet, decide: () => 'commit' }));
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/trustmsg/check`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 500);
    assert.match(await res.text(), /before express\.json\(\)/);
  } finally {
    server.close();
  }
});
