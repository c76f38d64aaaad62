// S01, S02 and S10 against the real trustmsg binary, through the kit.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type mysql from 'mysql2/promise';
import type pg from 'pg';
import { ConflictError, Producer, type MessageView, type TransactionResult } from '../../src/index.js';
import * as my from '../../src/mysql.js';
import * as pgsdk from '../../src/postgres.js';
import {
  eventually,
  kit,
  mysqlPool,
  ofMessage,
  postgresPool,
  producerFor,
  quiet,
  rand,
  readTopic,
  recordHeaders,
  recordKey,
  recordValue,
  register,
  viewWhen,
} from '../kit.js';

let mysqlDb: mysql.Pool;
let pgDb: pg.Pool;

before(async () => {
  mysqlDb = await mysqlPool();
  pgDb = await postgresPool();
  await mysqlDb.query('CREATE TABLE IF NOT EXISTS ts_orders (id VARCHAR(64) PRIMARY KEY, note VARCHAR(255) NOT NULL)');
  await pgDb.query('CREATE TABLE IF NOT EXISTS ts_orders (id VARCHAR(64) PRIMARY KEY, note VARCHAR(255) NOT NULL)');
});
after(async () => {
  await mysqlDb.end();
  await pgDb.end();
});

/** What each database's helpers look like to these tests. */
interface Db {
  name: string;
  transaction<T>(
    p: Producer,
    message: Parameters<Producer['prepare']>[0],
    work: (insert: (id: string, note: string) => Promise<void>) => Promise<T>,
  ): Promise<TransactionResult<T, MessageView>>;
  orders(id: string): Promise<number>;
  /** The barrier's `commit` markers of the message (0 or 1). */
  commitMarkers(bizId: string, key: string): Promise<number>;
}

const dbs: Db[] = [
  {
    name: 'mysql',
    transaction: (p, m, work) =>
      my.transaction(p, mysqlDb, m, (conn) =>
        work(async (id, note) => {
          await conn.execute('INSERT INTO ts_orders (id, note) VALUES (?, ?)', [id, note]);
        }),
      ),
    orders: async (id) => {
      const [rows] = await mysqlDb.execute('SELECT COUNT(*) AS n FROM ts_orders WHERE id = ?', [id]);
      return Number((rows as Array<{ n: number }>)[0]!.n);
    },
    commitMarkers: async (bizId, key) => {
      const [rows] = await mysqlDb.execute("SELECT COUNT(*) AS n FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ? AND op = 'commit'", [
        Buffer.from(bizId),
        Buffer.from(key),
      ]);
      return Number((rows as Array<{ n: number }>)[0]!.n);
    },
  },
  {
    name: 'postgres',
    transaction: (p, m, work) =>
      pgsdk.transaction(p, pgDb, m, (client) =>
        work(async (id, note) => {
          await client.query('INSERT INTO ts_orders (id, note) VALUES ($1, $2)', [id, note]);
        }),
      ),
    orders: async (id) => Number((await pgDb.query<{ n: string }>('SELECT COUNT(*) AS n FROM ts_orders WHERE id = $1', [id])).rows[0]!.n),
    commitMarkers: async (bizId, key) =>
      Number(
        (await pgDb.query<{ n: string }>("SELECT COUNT(*) AS n FROM trustmsg_barrier WHERE biz_id = $1 AND message_key = $2 AND op = 'commit'", [bizId, key]))
          .rows[0]!.n,
      ),
  },
];

for (const db of dbs) {
  describe(db.name, () => {
    test(`S01 a committed message reaches Kafka byte for byte (${db.name})`, async () => {
      const r = await register(`ts-s01-${db.name}-${rand()}`, 'http://127.0.0.1:9/unused');
      const p = producerFor(r);
      const topic = `ts-s01-${rand()}`;
      const key = `order-${rand()}`;
      const payload = new Uint8Array([0, 1, 2, 0xff, 0xfe, 0x7b, 0x0a]);
      const headers = { 'content-type': 'application/octet-stream', source: 'orders', 'x-ünicode': 'wert ✓' };
      const result = await db.transaction(p, { message_key: key, topic, key: 'customer-7', payload, headers }, async (insert) => {
        await insert(key, 'placed');
        return 42;
      });
      assert.equal(result.status, 'committed');
      assert.equal(result.value, 42);
      assert.ok(result.status === 'committed');
      const id = result.receipt.id;
      assert.equal(result.receipt.status, 'COMMITTED');
      assert.equal(await db.orders(key), 1);
      assert.equal(await db.commitMarkers(r.bizId, key), 1);

      // A later message of the same producer, on a partition of its own choosing: the
      // topic is read until both are there (records of different partitions arrive in
      // any order), then the message's records are counted.
      const marker = `marker-${rand()}`;
      await p.prepare({ message_key: marker, topic, payload: 'marker' });
      await p.commit(marker);
      const records = await readTopic(topic, (rs) => ofMessage(rs, marker).length > 0 && ofMessage(rs, key).length > 0);
      const ours = ofMessage(records, key);
      assert.equal(ours.length, 1, 'exactly one record');
      const rec = ours[0]!;
      assert.deepEqual(recordKey(rec), Buffer.from('customer-7'));
      assert.deepEqual(recordValue(rec), Buffer.from(payload));
      const got = recordHeaders(rec);
      for (const [k, v] of Object.entries(headers))
        assert.ok(
          got.some(([gk, gv]) => gk === k && gv === v),
          `header ${k}`,
        );
      assert.ok(
        got.some(([k, v]) => k === 'trustmsg-message-id' && v === id.toString()),
        `trustmsg-message-id ${id}: ${JSON.stringify(got)}`,
      );
      await viewWhen(p, key, (v) => v.status === 'COMMITTED' && v.send_status === 'SENT');
    });

    test(`S02 a local transaction that fails is rolled back and never delivered (${db.name})`, async () => {
      const r = await register(`ts-s02-${db.name}-${rand()}`, 'http://127.0.0.1:9/unused');
      const p = producerFor(r);
      const topic = `ts-s02-${rand()}`;
      const key = `order-${rand()}`;
      class PaymentDeclined extends Error {}
      const thrown = new PaymentDeclined('payment declined');
      let ran = false;
      await assert.rejects(
        db.transaction(p, { message_key: key, topic, payload: '{"order":1}' }, async (insert) => {
          ran = true;
          await insert(key, 'not placed');
          throw thrown;
        }),
        (e: unknown) => {
          // The work's own error: not swallowed, not wrapped, not replaced.
          assert.equal(e, thrown);
          return true;
        },
      );
      assert.ok(ran);
      assert.equal(await db.orders(key), 0, 'the business row is rolled back');
      // The commit marker rolled back with the rest; the helper then wrote the rollback marker, as check-back would.
      assert.equal(await db.commitMarkers(r.bizId, key), 0, 'no commit marker in the barrier');
      assert.equal((await p.get(key)).status, 'ROLLED_BACK');

      const marker = `marker-${rand()}`;
      await p.prepare({ message_key: marker, topic, payload: 'marker' });
      await p.commit(marker);
      const records = await readTopic(topic, (rs) => ofMessage(rs, marker).length > 0);
      assert.equal(ofMessage(records, key).length, 0, 'never delivered');
      assert.equal((await p.get(key)).status, 'ROLLED_BACK');
    });
  });
}

test('S10 a 503 from trustmsg is retried with backoff and a 409 is not', async () => {
  const r = await register(`ts-s10-${rand()}`, 'http://127.0.0.1:9/unused');
  const p = new Producer({ baseURL: kit.proxyUrl, bizId: r.bizId, token: r.token, logger: quiet });
  const key = `order-${rand()}`;
  await p.prepare({ message_key: key, topic: 'ts-s10', payload: '{}' });
  const fault = await fetch(`${kit.proxyUrl}/_kit/faults`, { method: 'POST', body: JSON.stringify({ match: key, status: 503, count: 2 }) });
  assert.equal(fault.status, 204);
  const view = await p.commit(key);
  assert.equal(view.status, 'COMMITTED');
  const seen = (await (await fetch(`${kit.proxyUrl}/_kit/requests?match=${encodeURIComponent(key)}`)).json()) as Array<{
    path: string;
    at_ms: number;
    status: number;
  }>;
  const commits = seen.filter((s) => s.path === '/v1/messages/commit');
  assert.deepEqual(
    commits.map((c) => c.status),
    [503, 503, 200],
  );
  const gap1 = commits[1]!.at_ms - commits[0]!.at_ms;
  const gap2 = commits[2]!.at_ms - commits[1]!.at_ms;
  // Each wait at least its floor (100 ms, then 200: above the first's
  // 150 ms ceiling); a late timer on a loaded machine can stretch only one.
  assert.ok(gap1 >= 90 && gap2 >= 190, `the gaps grow: ${gap1} ms then ${gap2} ms`);

  const key2 = `order-${rand()}`;
  await p.prepare({ message_key: key2, topic: 'ts-s10', payload: 'one' });
  await assert.rejects(
    p.prepare({ message_key: key2, topic: 'ts-s10', payload: 'two' }),
    (e: unknown) => e instanceof ConflictError && e.code === 'prepare_conflict' && e.status === 409,
  );
  const seen2 = await eventually('the proxy to list the prepares', async () => {
    const s = (await (await fetch(`${kit.proxyUrl}/_kit/requests?match=${encodeURIComponent(key2)}`)).json()) as Array<{ path: string; status: number }>;
    return s.length >= 2 ? s : undefined;
  });
  assert.deepEqual(
    seen2.map((s) => [s.path, s.status]),
    [
      ['/v1/messages/prepare', 201],
      ['/v1/messages/prepare', 409],
    ],
    'the 409 after exactly one request',
  );
});
