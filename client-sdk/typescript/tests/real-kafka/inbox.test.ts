// S07 on a real Kafka broker (kit run --real-kafka): the inbox fed by a
// @platformatic/kafka consumer group, its `Message` given as it is. A member
// that processes a record and stops before committing its offset makes the
// group deliver the record again; the inbox answers repeat and the work
// does not run twice; once the offset is committed, the group goes on.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type mysql from 'mysql2/promise';
import type pg from 'pg';
import * as my from '../../src/mysql.js';
import * as pgsdk from '../../src/postgres.js';
import { GroupReader, header, requireRealKafka } from '../kafka.js';
import { mysqlPool, postgresPool, producerFor, rand, register, viewWhen } from '../kit.js';

let mysqlDb: mysql.Pool;
let pgDb: pg.Pool;
const TABLE = 'ts_real_kafka_charges';

before(async () => {
  requireRealKafka();
  mysqlDb = await mysqlPool();
  pgDb = await postgresPool();
  await mysqlDb.query(`CREATE TABLE IF NOT EXISTS ${TABLE} (order_key VARCHAR(128) NOT NULL, amount VARCHAR(64) NOT NULL)`);
  await pgDb.query(`CREATE TABLE IF NOT EXISTS ${TABLE} (order_key VARCHAR(128) NOT NULL, amount VARCHAR(64) NOT NULL)`);
});
after(async () => {
  await mysqlDb.end();
  await pgDb.end();
});

type Record = Awaited<ReturnType<GroupReader['next']>>;

interface Db {
  name: string;
  /** processOnce with work that inserts a charge row from the record's value. */
  charge(group: string, record: Record): Promise<{ status: string }>;
  charges(key: string): Promise<string[]>;
}

const dbs: Db[] = [
  {
    name: 'mysql',
    charge: (group, record) =>
      my.processOnce(mysqlDb, group, record, async (conn) => {
        await conn.execute(`INSERT INTO ${TABLE} (order_key, amount) VALUES (?, ?)`, [record.key.toString(), record.value.toString()]);
      }),
    charges: async (key) =>
      ((await mysqlDb.execute(`SELECT amount FROM ${TABLE} WHERE order_key = ?`, [key]))[0] as Array<{ amount: string }>).map((x) => x.amount),
  },
  {
    name: 'postgres',
    charge: (group, record) =>
      pgsdk.processOnce(pgDb, group, record, async (client) => {
        await client.query(`INSERT INTO ${TABLE} (order_key, amount) VALUES ($1, $2)`, [record.key.toString(), record.value.toString()]);
      }),
    charges: async (key) => (await pgDb.query<{ amount: string }>(`SELECT amount FROM ${TABLE} WHERE order_key = $1`, [key])).rows.map((x) => x.amount),
  },
];

for (const db of dbs) {
  describe(db.name, () => {
    test(`S07 a consumer group's redelivery on a real broker is a repeat, and the committed offset holds (${db.name})`, async () => {
      const r = await register(`ts-s07r-${db.name}-${rand()}`, 'http://127.0.0.1:9/unused');
      const p = producerFor(r);
      const topic = `ts-s07r-${rand()}`;
      const group = `billing-${rand()}`;
      const deliver = async (messageKey: string, amount: string): Promise<bigint> => {
        await p.prepare({ message_key: messageKey, topic, key: messageKey, payload: amount, headers: { kind: 'charge' } });
        await p.commit(messageKey);
        return (await viewWhen(p, messageKey, (v) => v.send_status === 'SENT')).id;
      };
      const first = `order-${rand()}`;
      const firstId = await deliver(first, '12.50');

      // A member processes the record and stops before committing its offset.
      const a = await GroupReader.open(group, topic);
      let delivered: Record;
      try {
        delivered = await a.next();
        assert.deepEqual(delivered.key, Buffer.from(first));
        assert.deepEqual(delivered.value, Buffer.from('12.50'));
        assert.equal(header(delivered, 'kind'), 'charge');
        assert.equal(header(delivered, 'trustmsg-message-id'), firstId.toString());
        assert.deepEqual(await db.charge(group, delivered), { status: 'done', value: undefined });
      } finally {
        await a.close();
      }

      // The group delivers it again: a repeat, the work does not run; this member commits.
      const b = await GroupReader.open(group, topic);
      try {
        const again = await b.next();
        assert.deepEqual([again.partition, again.offset], [delivered.partition, delivered.offset], 'the same record, redelivered');
        assert.deepEqual(await db.charge(group, again), { status: 'repeat' });
        assert.deepEqual(await db.charges(first), ['12.50'], 'the work ran once');
        await again.commit();
      } finally {
        await b.close();
      }

      // The committed offset holds: the next member reads only what came after.
      const second = `order-${rand()}`;
      const secondId = await deliver(second, '7.00');
      const c = await GroupReader.open(group, topic);
      try {
        const next = await c.next();
        assert.equal(header(next, 'trustmsg-message-id'), secondId.toString(), 'the committed record is not read again');
        assert.deepEqual(await db.charge(group, next), { status: 'done', value: undefined });
        await next.commit();
      } finally {
        await c.close();
      }
      assert.deepEqual(await db.charges(second), ['7.00']);
      assert.deepEqual(await db.charges(first), ['12.50']);
    });
  });
}
