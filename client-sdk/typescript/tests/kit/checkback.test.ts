// S03, S04, S05 and S06: the barrier and the check-back endpoint against the
// real binary, on MariaDB and PostgreSQL, served by real HTTP servers.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type mysql from 'mysql2/promise';
import type pg from 'pg';
import {
  AlreadyDecidedError,
  Producer,
  signCheckBack,
  UnavailableError,
  verifyCheckBack,
  WebhookVerificationError,
  type CheckRequest,
  type Decider,
  type Message,
  type MessageView,
  type TransactionResult,
} from '../../src/index.js';
import * as my from '../../src/mysql.js';
import * as pgsdk from '../../src/postgres.js';
import { vectors } from '../vectors.js';
import { checkServer, FRAMEWORKS, type Framework } from '../servers.js';
import { kit, mysqlPool, ofMessage, postgresPool, producerFor, quiet, rand, readTopic, register, setVerifyUrl, viewWhen } from '../kit.js';

let mysqlDb: mysql.Pool;
let pgDb: pg.Pool;

before(async () => {
  mysqlDb = await mysqlPool();
  pgDb = await postgresPool();
});
after(async () => {
  await mysqlDb.end();
  await pgDb.end();
});

/** One database as the scenarios use it: a local transaction held open by hand, the barrier, the decider. */
interface Db {
  name: string;
  framework: Framework;
  decider(): Decider;
  check(bizId: string, key: string): Promise<'commit' | 'rollback'>;
  commitLocally(bizId: string, key: string): Promise<void>;
  /** The barrier's transaction helper with an empty local work. */
  transaction(p: Producer, message: Message): Promise<TransactionResult<string, MessageView>>;
  /** Opens a transaction with the commit marker of `key`; returns how to end it. */
  open(bizId: string, key: string): Promise<{ commit(): Promise<void>; rollback(): Promise<void> }>;
  markers(bizId: string): Promise<Array<{ key: string; op: string }>>;
  purge(ageMs: number): Promise<number>;
}

const dbs: Db[] = [
  {
    name: 'mysql',
    framework: 'express',
    decider: () => my.barrierDecider(mysqlDb),
    check: (b, k) => my.checkMarker(mysqlDb, b, k),
    commitLocally: async (b, k) => {
      await my.runInTransaction(mysqlDb, b, k, async () => undefined);
    },
    transaction: (p, m) => my.transaction(p, mysqlDb, m, async () => 'stored'),
    purge: (ageMs) => my.purgeBarrier(mysqlDb, ageMs),
    open: async (b, k) => {
      const conn = await mysqlDb.getConnection();
      await conn.query('BEGIN');
      await my.insertMarker(conn, b, k);
      return {
        commit: async () => {
          await conn.query('COMMIT');
          conn.release();
        },
        rollback: async () => {
          await conn.query('ROLLBACK');
          conn.release();
        },
      };
    },
    markers: async (b) => {
      const [rows] = await mysqlDb.execute('SELECT message_key, op FROM trustmsg_barrier WHERE biz_id = ? ORDER BY message_key', [Buffer.from(b)]);
      return (rows as Array<{ message_key: Buffer; op: Buffer | string }>).map((r) => ({ key: r.message_key.toString('utf8'), op: r.op.toString() }));
    },
  },
  {
    name: 'postgres',
    framework: 'hono',
    decider: () => pgsdk.barrierDecider(pgDb),
    check: (b, k) => pgsdk.checkMarker(pgDb, b, k),
    commitLocally: async (b, k) => {
      await pgsdk.runInTransaction(pgDb, b, k, async () => undefined);
    },
    transaction: (p, m) => pgsdk.transaction(p, pgDb, m, async () => 'stored'),
    purge: (ageMs) => pgsdk.purgeBarrier(pgDb, ageMs),
    open: async (b, k) => {
      const client = await pgDb.connect();
      await client.query('BEGIN');
      await pgsdk.insertMarker(client, b, k);
      return {
        commit: async () => {
          await client.query('COMMIT');
          client.release();
        },
        rollback: async () => {
          await client.query('ROLLBACK');
          client.release();
        },
      };
    },
    markers: async (b) =>
      (await pgDb.query<{ key: string; op: string }>('SELECT message_key AS key, op FROM trustmsg_barrier WHERE biz_id = $1 ORDER BY message_key', [b])).rows,
  },
];

/** A check-back call as trustmsg makes it, signed with `secret` (or as told). */
function call(
  url: string,
  secret: string,
  req: { biz_id: string; message_key: string; message_id: bigint },
  opts: { ts?: number; body?: string; headers?: boolean } = {},
): Promise<Response> {
  const body =
    opts.body ??
    `{"biz_id":${JSON.stringify(req.biz_id)},"message_key":${JSON.stringify(req.message_key)},"message_id":${req.message_id},"attempt":1,"prepared_at":"2026-01-01T00:00:00Z"}`;
  const ts = opts.ts ?? Math.floor(Date.now() / 1000);
  const id = `chk_${req.message_id}_1`;
  const signed =
    opts.body === undefined
      ? body
      : `{"biz_id":${JSON.stringify(req.biz_id)},"message_key":${JSON.stringify(req.message_key)},"message_id":${req.message_id},"attempt":1,"prepared_at":"2026-01-01T00:00:00Z"}`;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (opts.headers !== false) {
    headers['webhook-id'] = id;
    headers['webhook-timestamp'] = String(ts);
    headers['webhook-signature'] = signCheckBack(secret, id, ts, signed);
  }
  return fetch(url, { method: 'POST', headers, body });
}

for (const db of dbs) {
  describe(db.name, () => {
    test(`S03 a producer that stops between its local commit and the commit call is committed by check-back (${db.name}, ${db.framework})`, async () => {
      const calls: CheckRequest[] = [];
      const decide = db.decider();
      // The secret comes with the registration; the URL with the server: register, serve, then point it there.
      const r = await register(`ts-s03-${db.name}-${rand()}`, 'http://127.0.0.1:9/not-yet');
      const server = await checkServer(db.framework, {
        secret: r.secret,
        decide: async (req) => {
          calls.push(req);
          return decide(req);
        },
        logger: quiet,
      });
      try {
        await setVerifyUrl(r.bizId, server.url);
        const p = producerFor(r);
        const topic = `ts-s03-${rand()}`;
        const key = `order-${rand()}`;
        const view = await p.prepare({ message_key: key, topic, payload: 'crashed before commit' });
        await db.commitLocally(r.bizId, key);
        // …and the process stops here: no commit call.
        const committed = await viewWhen(p, key, (v) => v.status === 'COMMITTED', 30_000);
        assert.equal(committed.id, view.id);
        assert.ok(
          calls.some((c) => c.message_key === key && c.message_id === view.id && c.biz_id === r.bizId),
          'the handler was asked, signed',
        );
        const records = await readTopic(topic, (rs) => ofMessage(rs, key).length > 0);
        assert.equal(ofMessage(records, key).length, 1);

        // The same through the helper, its commit call failing (503 on every attempt,
        // through the kit's fault proxy): the result says so, and check-back commits.
        const lost = `order-${rand()}`;
        const fault = await fetch(`${kit.proxyUrl}/_kit/faults`, {
          method: 'POST',
          body: JSON.stringify({ match: `"message_key":"${lost}"}`, status: 503, count: 100 }),
        });
        assert.equal(fault.status, 204);
        const viaProxy = new Producer({ baseURL: kit.proxyUrl, bizId: r.bizId, token: r.token, maxRetries: 2, minRetryDelayMs: 10, logger: quiet });
        const result = await db.transaction(viaProxy, { message_key: lost, topic, payload: 'commit call lost' });
        assert.equal(result.status, 'commit_left_to_check_back');
        assert.ok(result.status === 'commit_left_to_check_back' && result.error instanceof UnavailableError && result.error.attempts === 3);
        assert.equal(result.value, 'stored');
        await viewWhen(p, lost, (v) => v.status === 'COMMITTED', 30_000);
      } finally {
        await server.close();
      }
    });

    for (const outcome of ['commit', 'rollback'] as const) {
      test(`S04 a check-back that arrives while the local transaction is open waits and answers ${outcome} (${db.name})`, async () => {
        const bizId = `ts-s04-${db.name}-${rand()}`;
        const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
        const server = await checkServer(db.framework, { secret, decide: db.decider(), logger: quiet });
        try {
          const key = `order-${rand()}`;
          const tx = await db.open(bizId, key);
          let answered = false;
          const pending = call(server.url, secret, { biz_id: bizId, message_key: key, message_id: 4711n }).then(async (res) => {
            answered = true;
            return { status: res.status, body: (await res.json()) as { message_id: number; decision: string } };
          });
          await new Promise((r) => setTimeout(r, 700));
          assert.equal(answered, false, 'no answer while the local transaction is open');
          if (outcome === 'commit') await tx.commit();
          else await tx.rollback();
          const answer = await pending;
          assert.equal(answer.status, 200);
          assert.deepEqual(answer.body, { message_id: 4711, decision: outcome });
          if (outcome === 'rollback') {
            await assert.rejects(db.commitLocally(bizId, key), (e: unknown) => e instanceof AlreadyDecidedError && e.decision === 'rollback');
          }
        } finally {
          await server.close();
        }
      });
    }

    test(`S05 barrier keys that differ only by a trailing space or case are different messages (${db.name})`, async () => {
      const bizId = `ts-s05-${db.name}-${rand()}`;
      const { pairs } = vectors<{ pairs: Array<{ name: string; a: string; b: string }> }>('barrier-keys.json');
      assert.ok(pairs.length >= 4);
      for (const { name, a, b } of pairs) {
        const biz = `${bizId}-${pairs.findIndex((p) => p.name === name)}`;
        await db.commitLocally(biz, a);
        assert.equal(await db.check(biz, b), 'rollback', `${name}: b has no marker of its own`);
        assert.equal(await db.check(biz, a), 'commit', `${name}: a is still commit`);
      }
      // Purging markers older than a day keeps these (the databases are the run's own: nothing is that old).
      assert.equal(await db.purge(24 * 60 * 60 * 1000), 0);
      assert.equal(await db.check(`${bizId}-0`, pairs[0]!.a), 'commit');
    });
  });
}

for (const framework of FRAMEWORKS) {
  test(`S06 a forged or stale check-back is refused (${framework})`, async () => {
    const bizId = `ts-s06-${framework}-${rand()}`;
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const other = 'whsec_c2VjcmV0LW9mLWFub3RoZXItcHJvZHVjZXI=';
    const db = framework === 'fastify' ? dbs[1]! : dbs[0]!;
    const server = await checkServer(framework, { secret, decide: db.decider(), logger: quiet });
    try {
      const req = { biz_id: bizId, message_key: `order-${rand()}`, message_id: 9007199254740993n };
      const refused = [
        ['another secret', await call(server.url, other, req)],
        [
          'a tampered body',
          await call(server.url, secret, req, {
            body: `{"biz_id":"${bizId}","message_key":"${req.message_key}","message_id":9007199254740994,"attempt":1,"prepared_at":"2026-01-01T00:00:00Z"}`,
          }),
        ],
        ['a timestamp 10 minutes old', await call(server.url, secret, req, { ts: Math.floor(Date.now() / 1000) - 600 })],
        ['no signature headers', await call(server.url, secret, req, { headers: false })],
      ] as const;
      for (const [why, res] of refused) assert.equal(res.status, 401, why);
      assert.deepEqual(await db.markers(bizId), [], 'no marker written for a forged call');
      const ok = await call(server.url, secret, req);
      assert.equal(ok.status, 200);
      // Every digit of a 64-bit id echoed.
      assert.equal(await ok.text(), '{"message_id":9007199254740993,"decision":"rollback"}');
      assert.deepEqual(await db.markers(bizId), [{ key: req.message_key, op: 'rollback' }]);
    } finally {
      await server.close();
    }
  });
}

test('S06 every case of check-signatures.json agrees with the verifier', () => {
  const v = vectors<{
    tolerance_secs: number;
    cases: Array<{ name: string; secret: string; headers: Record<string, string>; body: string; now: number; valid: boolean }>;
  }>('check-signatures.json');
  for (const c of v.cases) {
    let valid = true;
    try {
      verifyCheckBack(c.secret, c.headers, c.body, { now: () => c.now, toleranceSecs: v.tolerance_secs });
    } catch (e) {
      assert.ok(e instanceof WebhookVerificationError);
      valid = false;
    }
    assert.equal(valid, c.valid, c.name);
  }
});
