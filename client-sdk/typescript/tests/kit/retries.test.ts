// S11, S12, S13 and S14: a client's retry of an order, against the real
// binary, on MariaDB and PostgreSQL. A message already decided runs no local
// work again; what the barrier knows, the helper sends.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type mysql from 'mysql2/promise';
import type pg from 'pg';
import {
  AlreadyCommittedError,
  AlreadyRolledBackError,
  ConflictError,
  type Message,
  type MessageView,
  type Producer,
  type TransactionOptions,
  type TransactionResult,
} from '../../src/index.js';
import * as my from '../../src/mysql.js';
import * as pgsdk from '../../src/postgres.js';
import {
  close,
  createServer,
  listen,
  mysqlPool,
  ofMessage,
  postgresPool,
  producerFor,
  rand,
  readTopic,
  recordHeaders,
  register,
  type TailRecord,
} from '../kit.js';

let mysqlDb: mysql.Pool;
let pgDb: pg.Pool;

const ORDERS = 'CREATE TABLE IF NOT EXISTS ts_retry_orders (id VARCHAR(64) PRIMARY KEY)';
before(async () => {
  mysqlDb = await mysqlPool();
  pgDb = await postgresPool();
  await mysqlDb.query(ORDERS);
  await pgDb.query(ORDERS);
});
after(async () => {
  await mysqlDb.end();
  await pgDb.end();
});

/** The barrier helper whose work inserts the order row (then runs `then`), and what the database holds. */
interface Db {
  name: string;
  place(p: Producer, m: Message, then: () => Promise<void>, options?: TransactionOptions): Promise<TransactionResult<string, MessageView>>;
  /** A check-back answered from the barrier (inserts the rollback marker when there is none). */
  check(bizId: string, key: string): Promise<'commit' | 'rollback'>;
  orders(id: string): Promise<number>;
  markers(bizId: string, key: string): Promise<string[]>;
}

const dbs: Db[] = [
  {
    name: 'mysql',
    place: (p, m, then, options) =>
      my.transaction(
        p,
        mysqlDb,
        m,
        async (conn) => {
          await conn.execute('INSERT INTO ts_retry_orders (id) VALUES (?)', [m.message_key]);
          await then();
          return m.message_key;
        },
        options,
      ),
    check: (b, k) => my.checkMarker(mysqlDb, b, k),
    orders: async (id) => {
      const [rows] = await mysqlDb.execute('SELECT COUNT(*) AS n FROM ts_retry_orders WHERE id = ?', [id]);
      return Number((rows as Array<{ n: number }>)[0]!.n);
    },
    markers: async (b, k) => {
      const [rows] = await mysqlDb.execute('SELECT op FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ?', [Buffer.from(b), Buffer.from(k)]);
      return (rows as Array<{ op: Buffer | string }>).map((r) => r.op.toString());
    },
  },
  {
    name: 'postgres',
    place: (p, m, then, options) =>
      pgsdk.transaction(
        p,
        pgDb,
        m,
        async (client) => {
          await client.query('INSERT INTO ts_retry_orders (id) VALUES ($1)', [m.message_key]);
          await then();
          return m.message_key;
        },
        options,
      ),
    check: (b, k) => pgsdk.checkMarker(pgDb, b, k),
    orders: async (id) => Number((await pgDb.query<{ n: string }>('SELECT COUNT(*) AS n FROM ts_retry_orders WHERE id = $1', [id])).rows[0]!.n),
    markers: async (b, k) =>
      (await pgDb.query<{ op: string }>('SELECT op FROM trustmsg_barrier WHERE biz_id = $1 AND message_key = $2', [b, k])).rows.map((r) => r.op),
  },
];

const nothing = async (): Promise<void> => undefined;

/** The topic's records once a later message is there, and every key of `keys` (records of different partitions arrive in any order). */
async function recordsAfterMarker(p: Producer, topic: string, keys: string[] = []): Promise<TailRecord[]> {
  const marker = `marker-${rand()}`;
  await p.prepare({ message_key: marker, topic, payload: 'marker' });
  await p.commit(marker);
  return readTopic(topic, (rs) => ofMessage(rs, marker).length > 0 && keys.every((k) => ofMessage(rs, k).length > 0));
}

const messageIds = (records: TailRecord[]): Set<string | null> =>
  new Set(records.map((r) => recordHeaders(r).find(([k]) => k === 'trustmsg-message-id')?.[1] ?? null));

for (const db of dbs) {
  describe(db.name, () => {
    test(`S11 a retried order whose message was rolled back is refused before any local work (${db.name})`, async () => {
      const r = await register(`ts-s11-${db.name}-${rand()}`, 'http://127.0.0.1:9/unused');
      const p = producerFor(r);
      const topic = `ts-s11-${rand()}`;
      const declined = new Error('payment declined');

      // The barrier helper: the first attempt fails (rolled back), the client retries.
      const key = `order-${rand()}`;
      const m: Message = { message_key: key, topic, payload: '{"order":11}' };
      await assert.rejects(
        db.place(p, m, async () => {
          throw declined;
        }),
        (e: unknown) => e === declined,
      );
      assert.equal((await p.get(key)).status, 'ROLLED_BACK');
      let ran = false;
      await assert.rejects(
        db.place(p, m, async () => {
          ran = true;
        }),
        (e: unknown) => e instanceof AlreadyRolledBackError && e instanceof ConflictError && e.status === 409 && e.code === 'already_rolled_back',
      );
      assert.equal(ran, false, 'the local work did not run');
      assert.equal(await db.orders(key), 0, 'no business row');
      assert.ok(!(await db.markers(r.bizId, key)).includes('commit'), 'no commit marker (the failed run left the rollback marker)');
      assert.equal((await p.get(key)).status, 'ROLLED_BACK');

      // The plain helper, the same.
      const plain = `order-${rand()}`;
      const pm: Message = { message_key: plain, topic, payload: '{"order":"plain"}' };
      await assert.rejects(
        p.transaction(pm, async () => {
          throw declined;
        }),
        (e: unknown) => e === declined,
      );
      await assert.rejects(
        p.transaction(pm, async () => assert.fail('the plain helper ran local work for a rolled-back message')),
        (e: unknown) => e instanceof AlreadyRolledBackError && e.code === 'already_rolled_back',
      );
      assert.equal((await p.get(plain)).status, 'ROLLED_BACK');

      // The barrier's rollback marker (a check-back answered rollback, its answer lost): the helper sends the rollback.
      const marked = `order-${rand()}`;
      await p.prepare({ message_key: marked, topic, payload: '{"order":"marked"}' });
      assert.equal(await db.check(r.bizId, marked), 'rollback');
      await assert.rejects(
        db.place(p, { message_key: marked, topic, payload: '{"order":"marked"}' }, async () => assert.fail('ran under a rollback marker')),
        (e: unknown) => e instanceof AlreadyRolledBackError,
      );
      assert.equal(await db.orders(marked), 0);
      assert.equal((await p.get(marked)).status, 'ROLLED_BACK', 'the helper sent the rollback');

      const records = await recordsAfterMarker(p, topic);
      for (const k of [key, plain, marked]) assert.equal(ofMessage(records, k).length, 0, `nothing of ${k} reaches Kafka`);
    });

    test(`S12 a retried order that finds its local commit is committed at once, with no check-back call (${db.name})`, async () => {
      let checkBacks = 0;
      const counting = createServer((_req, res) => {
        checkBacks++;
        res.writeHead(500).end();
      });
      const url = await listen(counting);
      try {
        const r = await register(`ts-s12-${db.name}-${rand()}`, `${url}/trustmsg/check`, ['*'], 60_000);
        const p = producerFor(r);
        const topic = `ts-s12-${rand()}`;
        const key = `order-${rand()}`;
        const m: Message = { message_key: key, topic, key: 'customer-12', payload: '{"order":12}' };
        const crash = new Error('the process stops after its local COMMIT');
        await assert.rejects(
          db.place(p, m, nothing, {
            afterLocalCommit: () => {
              throw crash;
            },
          }),
          (e: unknown) => e === crash,
        );
        assert.equal(await db.orders(key), 1, 'the local transaction committed');
        assert.deepEqual(await db.markers(r.bizId, key), ['commit']);
        assert.equal((await p.get(key)).status, 'PREPARED', 'no decision was sent');

        let ran = false;
        let placed: AlreadyCommittedError | undefined;
        await assert.rejects(
          db.place(p, m, async () => {
            ran = true;
          }),
          (e: unknown) => {
            placed = e as AlreadyCommittedError;
            return e instanceof AlreadyCommittedError;
          },
        );
        assert.equal(ran, false, 'the retry ran no local work');
        assert.equal(placed?.view?.status, 'COMMITTED', 'the helper sent the commit itself');
        assert.equal(placed.commitError, undefined);
        assert.equal((await p.get(key)).status, 'COMMITTED', 'COMMITTED when the call returns');
        assert.equal(await db.orders(key), 1);

        const records = await recordsAfterMarker(p, topic, [key]);
        assert.equal(ofMessage(records, key).length, 1, 'one record on Kafka');
        assert.equal(checkBacks, 0, 'check-back was never called');
      } finally {
        await close(counting);
      }
    });

    test(`S13 two identical requests for one order at the same moment make one local commit and one message (${db.name})`, async () => {
      const r = await register(`ts-s13-${db.name}-${rand()}`, 'http://127.0.0.1:9/unused');
      const topic = `ts-s13-${rand()}`;
      const key = `order-${rand()}`;
      const m: Message = { message_key: key, topic, key, payload: '{"order":13}' };
      // Two clients (their own Producer, their own connection from the pool), the work slow enough to overlap.
      const slow = (): Promise<void> => new Promise((done) => setTimeout(done, 300));
      const calls = await Promise.allSettled([db.place(producerFor(r), m, slow), db.place(producerFor(r), m, slow)]);
      const placed = calls.filter((c) => c.status === 'fulfilled' && c.value.status === 'committed');
      const already = calls.filter((c) => c.status === 'rejected' && c.reason instanceof AlreadyCommittedError);
      assert.equal(
        placed.length + already.length,
        2,
        `only placed or already-committed: ${calls.map((c) => (c.status === 'rejected' ? String(c.reason) : c.value.status)).join(', ')}`,
      );
      assert.ok(placed.length >= 1, 'one call placed the order');
      assert.equal(await db.orders(key), 1, 'one business row');
      assert.deepEqual(await db.markers(r.bizId, key), ['commit'], 'one commit marker');
      const p = producerFor(r);
      assert.equal((await p.get(key)).status, 'COMMITTED');
      const records = await recordsAfterMarker(p, topic, [key]);
      assert.equal(messageIds(ofMessage(records, key)).size, 1, 'one message id under the key');
    });

    test(`S13 two identical requests of which only one fails: the other is refused, or the failing one finds the order placed (${db.name})`, async (t) => {
      const r = await register(`ts-s13f-${db.name}-${rand()}`, 'http://127.0.0.1:9/unused');
      const topic = `ts-s13f-${rand()}`;
      const key = `order-${rand()}`;
      const m: Message = { message_key: key, topic, key, payload: '{"order":"13f"}' };
      const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));
      const timedOut = new Error('payment timed out');
      // A holds the barrier's commit marker for 300 ms, then fails (a transient failure);
      // B, the same request 100 ms later, waits on A's marker, and its work succeeds.
      const [a, b] = await Promise.allSettled([
        db.place(producerFor(r), m, async () => {
          await sleep(300);
          throw timedOut;
        }),
        sleep(100).then(() => db.place(producerFor(r), m, nothing)),
      ]);
      const rows = await db.orders(key);
      const status = (await producerFor(r).get(key)).status;
      const shown = (c: PromiseSettledResult<TransactionResult<string, MessageView>>): string => (c.status === 'rejected' ? String(c.reason) : c.value.status);
      const seen = `A ${shown(a)} / B ${shown(b)} (${rows} order rows, message ${status})`;
      t.diagnostic(seen);
      if (a.status === 'rejected' && a.reason === timedOut) {
        // A reached the barrier first: its rollback stands, B is refused.
        assert.ok(b.status === 'rejected' && b.reason instanceof AlreadyRolledBackError, seen);
        assert.equal(rows, 0, seen);
        assert.equal(status, 'ROLLED_BACK', seen);
      } else {
        // B committed first: A finds the order placed and sends the commit.
        assert.ok(a.status === 'rejected' && a.reason instanceof AlreadyCommittedError, seen);
        assert.ok(b.status === 'fulfilled' && b.value.status === 'committed', seen);
        assert.equal(rows, 1, seen);
        assert.equal(status, 'COMMITTED', seen);
      }
    });

    test(`S14 a prepare answered COMMITTED runs no local work (${db.name})`, async () => {
      const r = await register(`ts-s14-${db.name}-${rand()}`, 'http://127.0.0.1:9/unused');
      const p = producerFor(r);
      const topic = `ts-s14-${rand()}`;

      const key = `order-${rand()}`;
      const m: Message = { message_key: key, topic, payload: '{"order":14}' };
      const first = await db.place(p, m, nothing);
      assert.equal(first.status, 'committed');
      const view = await p.prepare(m);
      assert.equal(view.status, 'COMMITTED', 'prepare answers 200 with status COMMITTED');
      await assert.rejects(
        db.place(p, m, async () => assert.fail('the barrier helper entered its callback')),
        (e: unknown) => e instanceof AlreadyCommittedError && e.view?.status === 'COMMITTED' && e.view.id === view.id,
      );
      assert.equal(await db.orders(key), 1);

      const plain = `order-${rand()}`;
      const pm: Message = { message_key: plain, topic, payload: '{"order":"plain"}' };
      assert.equal((await p.transaction(pm, async () => 'placed')).status, 'committed');
      await assert.rejects(
        p.transaction(pm, async () => assert.fail('the plain helper entered its callback')),
        (e: unknown) => e instanceof AlreadyCommittedError && e.view?.status === 'COMMITTED',
      );

      const records = await recordsAfterMarker(p, topic, [key, plain]);
      assert.equal(ofMessage(records, key).length, 1, 'nothing new on Kafka');
      assert.equal(ofMessage(records, plain).length, 1);
    });
  });
}
