// The order-service example, started as a newcomer starts it, against the real binary.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { SDK_DIR } from '../vectors.js';
import { kit, ofMessage, producerFor, rand, readTopic, register, setVerifyUrl, viewWhen } from '../kit.js';

for (const db of ['mysql', 'postgres'] as const) {
  test(`the order-service example places, rolls back, settles by check-back and answers retries (${db})`, async () => {
    const r = await register(`ts-example-${db}-${rand()}`, 'http://127.0.0.1:9/not-yet');
    const topic = `ts-orders-${rand()}`;
    const child = spawn(process.execPath, [join(SDK_DIR, '.test-build', 'examples', 'order-service.js')], {
      env: {
        ...process.env,
        TRUSTMSG_URL: kit.url,
        TRUSTMSG_DEMO_BIZ_ID: r.bizId,
        TRUSTMSG_DEMO_TOKEN: r.token,
        TRUSTMSG_DEMO_SIGNING_SECRET: r.secret,
        DATABASE_URL: db === 'mysql' ? kit.mysqlUrl : kit.postgresUrl,
        ORDERS_TOPIC: topic,
        PORT: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stderr.on('data', (c: Buffer) => (log += c.toString()));
    try {
      const base = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (c: Buffer) => {
          log += c.toString();
          const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
          if (m) resolve(m[1]!);
        });
        child.on('exit', (code) => {
          reject(new Error(`the example exited with ${code}: ${log}`));
        });
      });
      await setVerifyUrl(r.bizId, `${base}/trustmsg/check`);
      const order = (body: object): Promise<Response> =>
        fetch(`${base}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const [a1, a2, a3] = [`A-${rand()}`, `A-${rand()}`, `A-${rand()}`];

      const placed = await order({ order_id: a1, customer: 'alice', amount_cents: 1250 });
      assert.equal(placed.status, 201);
      const placedBody = (await placed.json()) as { message: string; message_id: string };
      assert.equal(placedBody.message, 'committed');

      const failed = await order({ order_id: a2, customer: 'bob', amount_cents: 990, fail: true });
      assert.equal(failed.status, 422);
      assert.match(((await failed.json()) as { detail: string }).detail, /payment declined/);

      const lost = await order({ order_id: a3, customer: 'carol', amount_cents: 4200, lose_commit: true });
      assert.equal(lost.status, 202);

      // The clients' retries: no local work again, and answers that say what happened before.
      const again = await order({ order_id: a1, customer: 'alice', amount_cents: 1250 });
      assert.equal(again.status, 200);
      assert.equal(((await again.json()) as { message: string }).message, 'already placed');
      const refused = await order({ order_id: a2, customer: 'bob', amount_cents: 990 });
      assert.equal(refused.status, 409);

      const p = producerFor(r);
      assert.equal((await p.get(a2)).status, 'ROLLED_BACK');
      await viewWhen(p, a3, (v) => v.status === 'COMMITTED', 30_000);
      const records = await readTopic(topic, (rs) => ofMessage(rs, a1).length > 0 && ofMessage(rs, a3).length > 0);
      assert.equal(ofMessage(records, a2).length, 0);
      const first = ofMessage(records, a1)[0]!;
      assert.ok(first.headers.some((h) => h.name === 'trustmsg-message-id' && h.value === placedBody.message_id));
      assert.deepEqual(JSON.parse(first.payload ?? ''), { event: 'order_placed', order_id: a1, customer: 'alice', amount_cents: 1250 });
    } finally {
      child.kill('SIGTERM');
    }
  });
}

test('the README quickstart runs as printed', async () => {
  const r = await register(`ts-quickstart-${rand()}`, 'http://127.0.0.1:9/unused');
  const { execFile } = await import('node:child_process');
  const out = await new Promise<string>((resolve, reject) => {
    execFile(
      process.execPath,
      [join(SDK_DIR, '.test-build', 'examples', 'quickstart.js')],
      { env: { ...process.env, TRUSTMSG_URL: kit.url, TRUSTMSG_DEMO_BIZ_ID: r.bizId, TRUSTMSG_DEMO_TOKEN: r.token } },
      (e, stdout, stderr) => (e ? reject(new Error(`${e.message}: ${stderr}`)) : resolve(stdout)),
    );
  });
  assert.match(out, /^prepared message \d+\nA-\d+: committed\nsame key, other content: prepare_conflict\nCOMMITTED\n$/);
});
