// S07: the consumer inbox on MariaDB and PostgreSQL, with records trustmsg delivered.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type mysql from 'mysql2/promise';
import type pg from 'pg';
import { messageIdOf, NoMessageIdError, type Producer } from '../../src/index.js';
import * as my from '../../src/mysql.js';
import * as pgsdk from '../../src/postgres.js';
import { vectors } from '../vectors.js';
import { mysqlPool, ofMessage, postgresPool, producerFor, rand, readTopic, recordHeaders, register, type TailRecord } from '../kit.js';

let mysqlDb: mysql.Pool;
let pgDb: pg.Pool;

before(async () => {
  mysqlDb = await mysqlPool();
  pgDb = await postgresPool();
  await mysqlDb.query('CREATE TABLE IF NOT EXISTS ts_charges (order_key VARCHAR(128) NOT NULL, note VARCHAR(64) NOT NULL)');
  await pgDb.query('CREATE TABLE IF NOT EXISTS ts_charges (order_key VARCHAR(128) NOT NULL, note VARCHAR(64) NOT NULL)');
});
after(async () => {
  await mysqlDb.end();
  await pgDb.end();
});

interface Db {
  name: string;
  process(
    group: string,
    record: { headers: Array<[string, string | null]> },
    work: (charge: (key: string) => Promise<void>) => Promise<string>,
  ): Promise<my.Processed<string>>;
  charges(key: string): Promise<number>;
  inboxRows(group: string): Promise<number>;
}

const dbs: Db[] = [
  {
    name: 'mysql',
    process: (group, record, work) =>
      my.processOnce(mysqlDb, group, record, (conn) =>
        work(async (key) => {
          await conn.execute('INSERT INTO ts_charges (order_key, note) VALUES (?, ?)', [key, 'charged']);
        }),
      ),
    charges: async (key) =>
      Number(((await mysqlDb.execute('SELECT COUNT(*) AS n FROM ts_charges WHERE order_key = ?', [key]))[0] as Array<{ n: number }>)[0]!.n),
    inboxRows: async (group) =>
      Number(
        ((await mysqlDb.execute('SELECT COUNT(*) AS n FROM trustmsg_inbox WHERE consumer_group = ?', [Buffer.from(group)]))[0] as Array<{ n: number }>)[0]!.n,
      ),
  },
  {
    name: 'postgres',
    process: (group, record, work) =>
      pgsdk.processOnce(pgDb, group, record, (client) =>
        work(async (key) => {
          await client.query('INSERT INTO ts_charges (order_key, note) VALUES ($1, $2)', [key, 'charged']);
        }),
      ),
    charges: async (key) => Number((await pgDb.query<{ n: string }>('SELECT COUNT(*) AS n FROM ts_charges WHERE order_key = $1', [key])).rows[0]!.n),
    inboxRows: async (group) =>
      Number((await pgDb.query<{ n: string }>('SELECT COUNT(*) AS n FROM trustmsg_inbox WHERE consumer_group = $1', [group])).rows[0]!.n),
  },
];

async function deliver(p: Producer, topic: string, key: string): Promise<TailRecord> {
  await p.prepare({ message_key: key, topic, payload: `{"order":"${key}"}` });
  await p.commit(key);
  const records = await readTopic(topic, (rs) => ofMessage(rs, key).length > 0);
  return ofMessage(records, key)[0]!;
}

for (const db of dbs) {
  describe(db.name, () => {
    test(`S07 the inbox drops a redelivered record and keeps the work atomic with it (${db.name})`, async () => {
      const r = await register(`ts-s07-${db.name}-${rand()}`, 'http://127.0.0.1:9/unused');
      const p = producerFor(r);
      const topic = `ts-s07-${rand()}`;
      const group = `billing-${rand()}`;
      const first = `order-${rand()}`;
      const record = { headers: recordHeaders(await deliver(p, topic, first)) };
      assert.equal(messageIdOf(record.headers), (await p.get(first)).id);

      let ran = 0;
      const work = async (charge: (key: string) => Promise<void>): Promise<string> => {
        ran++;
        await charge(first);
        return 'charged';
      };
      assert.deepEqual(await db.process(group, record, work), { status: 'done', value: 'charged' });
      assert.deepEqual(await db.process(group, record, work), { status: 'repeat' }, 'the redelivery is a repeat');
      assert.equal(ran, 1);
      assert.equal(await db.charges(first), 1, 'the work ran once');
      assert.equal(await db.inboxRows(group), 1);

      // A third record whose work fails: neither its business row nor its inbox row stays.
      const third = `order-${rand()}`;
      const failing = { headers: recordHeaders(await deliver(p, topic, third)) };
      const declined = new Error('card declined');
      await assert.rejects(
        db.process(group, failing, async (charge) => {
          await charge(third);
          throw declined;
        }),
        (e: unknown) => e === declined,
      );
      assert.equal(await db.charges(third), 0);
      assert.equal(await db.inboxRows(group), 1);
      // …so it is processed when it comes again.
      assert.deepEqual(
        await db.process(group, failing, async (charge) => {
          await charge(third);
          return 'charged';
        }),
        { status: 'done', value: 'charged' },
      );
      assert.equal(await db.charges(third), 1);

      // A record without a usable trustmsg-message-id is refused, not processed unkeyed.
      const { cases } = vectors<{ cases: Array<{ name: string; headers: Array<[string, string | null]>; message_id: number | null }> }>('record-headers.json');
      for (const c of cases.filter((x) => x.message_id === null)) {
        let touched = false;
        await assert.rejects(
          db.process(group, { headers: c.headers }, async () => {
            touched = true;
            return 'no';
          }),
          NoMessageIdError,
          c.name,
        );
        assert.equal(touched, false, c.name);
      }
      assert.equal(await db.inboxRows(group), 2);
    });

    test(`S07 two deliveries at once: the second waits for the first and is a repeat (${db.name})`, async () => {
      const group = `billing-${rand()}`;
      const key = `order-${rand()}`;
      const record = { headers: [['trustmsg-message-id', String(1_000_000 + Math.floor(Math.random() * 1e9))]] as Array<[string, string | null]> };
      let release: () => void = () => undefined;
      const held = new Promise<void>((r) => (release = r));
      const order: string[] = [];
      const first = db.process(group, record, async (charge) => {
        await charge(key);
        order.push('first working');
        await held;
        order.push('first done');
        return 'first';
      });
      await new Promise((r) => setTimeout(r, 300));
      const second = db.process(group, record, async () => {
        order.push('second working');
        return 'second';
      });
      await new Promise((r) => setTimeout(r, 500));
      order.push('releasing');
      release();
      assert.deepEqual(await first, { status: 'done', value: 'first' });
      assert.deepEqual(await second, { status: 'repeat' });
      assert.deepEqual(order, ['first working', 'releasing', 'first done']);
      assert.equal(await db.charges(key), 1);
    });
  });
}
