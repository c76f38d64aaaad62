// The kit's scenarios through the ORM adapters, against the real binary:
// a Prisma order (Prisma 7, client engine, driver adapters), a Drizzle order,
// a Kysely order and a TypeORM order, each on MariaDB and PostgreSQL. S01, S02, S03, S07,
// S09 and S13, with the ORM's own transaction and its own insert of the order.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import { PrismaPg } from '@prisma/adapter-pg';
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { mysqlTable, varchar as myVarchar } from 'drizzle-orm/mysql-core';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { pgTable, varchar as pgVarchar } from 'drizzle-orm/pg-core';
import { Kysely, MysqlDialect, PostgresDialect } from 'kysely';
import { DataSource, EntitySchema } from 'typeorm';
import { createPool as createCallbackPool } from 'mysql2';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { AlreadyCommittedError, DuplicateMessageError, type Message, type MessageView, type Producer, type TransactionResult } from '../../src/index.js';
import { forDrizzle } from '../../src/drizzle.js';
import { forKysely } from '../../src/kysely.js';
import { forPrisma } from '../../src/prisma.js';
import { forTypeorm } from '../../src/typeorm.js';
import type { InboxSubject, Processed } from '../../src/sql/core.js';
import type { TrustmsgOrm } from '../../src/sql/orm.js';
import { PrismaClient as PrismaMysqlClient } from '../prisma/generated/mysql/client.js';
import { PrismaClient as PrismaPgClient } from '../prisma/generated/postgres/client.js';
import { checkServer } from '../servers.js';
import {
  kit,
  mysqlPool,
  ofMessage,
  postgresPool,
  producerFor,
  quiet,
  rand,
  readTopic,
  recordKey,
  recordValue,
  register,
  setVerifyUrl,
  viewWhen,
} from '../kit.js';

const TABLE = 'ts_orm_orders';
type Insert = (id: string, note: string) => Promise<void>;

/** One ORM on one database, its transaction type hidden: the order insert is the ORM's own. */
interface Orm {
  name: string;
  dialect: 'mysql' | 'postgres';
  tm: { checkMarker(b: string, k: string): Promise<'commit' | 'rollback'>; barrierDecider: TrustmsgOrm<unknown>['barrierDecider'] };
  transaction<T>(p: Producer, m: Message, work: (insert: Insert) => Promise<T>, afterLocalCommit?: () => void): Promise<TransactionResult<T, MessageView>>;
  processOnce<T>(group: string, subject: InboxSubject, work: (insert: Insert) => Promise<T>): Promise<Processed<T>>;
  /** The application's own ORM transaction: `work` inserts the order and enqueues the message. */
  inOwnTransaction<T>(work: (insert: Insert, enqueue: (m: Message) => Promise<bigint>) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

function erase<Tx>(
  name: string,
  dialect: 'mysql' | 'postgres',
  tm: TrustmsgOrm<Tx>,
  insert: (tx: Tx, id: string, note: string) => Promise<unknown>,
  own: <T>(work: (tx: Tx) => Promise<T>) => Promise<T>,
  close: () => Promise<void>,
): Orm {
  const ins =
    (tx: Tx): Insert =>
    async (id, note) => {
      await insert(tx, id, note);
    };
  return {
    name,
    dialect,
    tm,
    transaction: (p, m, work, afterLocalCommit) => tm.transaction(p, m, (tx) => work(ins(tx)), { afterLocalCommit, logger: quiet }),
    processOnce: (group, subject, work) => tm.processOnce(group, subject, (tx) => work(ins(tx))),
    inOwnTransaction: (work) => own((tx) => work(ins(tx), (m) => tm.enqueue(tx, m))),
    close,
  };
}

let rawMysql: mysql.Pool;
let rawPg: pg.Pool;
const orms: Orm[] = [];

interface KyselyDb {
  ts_orm_orders: { id: string; note: string };
}
const myOrders = mysqlTable(TABLE, { id: myVarchar('id', { length: 64 }).primaryKey(), note: myVarchar('note', { length: 255 }).notNull() });
// eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- TypeORM types its plain options object as a class
const typeormOrders = new EntitySchema<{ id: string; note: string }>({
  name: 'Order',
  tableName: TABLE,
  columns: { id: { type: String, primary: true, length: 64 }, note: { type: String, length: 255 } },
});
const pgOrders = pgTable(TABLE, { id: pgVarchar('id', { length: 64 }).primaryKey(), note: pgVarchar('note', { length: 255 }).notNull() });

async function build(): Promise<Orm[]> {
  const prismaMy = new PrismaMysqlClient({ adapter: new PrismaMariaDb(kit.mysqlUrl.replace(/^mysql:/, 'mariadb:')) });
  const prismaPg = new PrismaPgClient({ adapter: new PrismaPg({ connectionString: kit.postgresUrl }) });
  const drizMyPool = mysql.createPool({ uri: kit.mysqlUrl, connectionLimit: 4 });
  const drizMy = drizzleMysql({ client: drizMyPool });
  const drizPgPool = new pg.Pool({ connectionString: kit.postgresUrl, max: 4 });
  const drizPg = drizzlePg({ client: drizPgPool });
  const kyMy = new Kysely<KyselyDb>({ dialect: new MysqlDialect({ pool: createCallbackPool({ uri: kit.mysqlUrl, connectionLimit: 4 }) }) });
  const kyPg = new Kysely<KyselyDb>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: kit.postgresUrl, max: 4 }) }) });
  const tyMy = await new DataSource({ type: 'mysql', url: kit.mysqlUrl, entities: [typeormOrders], poolSize: 4 }).initialize();
  const tyPg = await new DataSource({ type: 'postgres', url: kit.postgresUrl, entities: [typeormOrders], poolSize: 4 }).initialize();
  return [
    erase(
      'typeorm/mysql',
      'mysql',
      forTypeorm(tyMy),
      (manager, id, note) => manager.insert(typeormOrders, { id, note }),
      (work) => tyMy.transaction(work),
      () => tyMy.destroy(),
    ),
    erase(
      'typeorm/postgres',
      'postgres',
      forTypeorm(tyPg),
      (manager, id, note) => manager.insert(typeormOrders, { id, note }),
      (work) => tyPg.transaction(work),
      () => tyPg.destroy(),
    ),
    erase(
      'prisma/mysql',
      'mysql',
      forPrisma(prismaMy, { dialect: 'mysql', transactionOptions: { timeout: 20_000 } }),
      (tx, id, note) => tx.order.create({ data: { id, note } }),
      (work) => prismaMy.$transaction(work),
      () => prismaMy.$disconnect(),
    ),
    erase(
      'prisma/postgres',
      'postgres',
      forPrisma(prismaPg, { dialect: 'postgres', transactionOptions: { timeout: 20_000 } }),
      (tx, id, note) => tx.order.create({ data: { id, note } }),
      (work) => prismaPg.$transaction(work),
      () => prismaPg.$disconnect(),
    ),
    erase(
      'drizzle/mysql',
      'mysql',
      forDrizzle(drizMy, { dialect: 'mysql' }),
      (tx, id, note) => tx.insert(myOrders).values({ id, note }),
      (work) => drizMy.transaction(work),
      () => drizMyPool.end(),
    ),
    erase(
      'drizzle/postgres',
      'postgres',
      forDrizzle(drizPg, { dialect: 'postgres' }),
      (tx, id, note) => tx.insert(pgOrders).values({ id, note }),
      (work) => drizPg.transaction(work),
      () => drizPgPool.end(),
    ),
    erase(
      'kysely/mysql',
      'mysql',
      forKysely(kyMy, { dialect: 'mysql' }),
      (trx, id, note) => trx.insertInto(TABLE).values({ id, note }).execute(),
      (work) => kyMy.transaction().execute(work),
      () => kyMy.destroy(),
    ),
    erase(
      'kysely/postgres',
      'postgres',
      forKysely(kyPg, { dialect: 'postgres' }),
      (trx, id, note) => trx.insertInto(TABLE).values({ id, note }).execute(),
      (work) => kyPg.transaction().execute(work),
      () => kyPg.destroy(),
    ),
  ];
}

before(async () => {
  rawMysql = await mysqlPool();
  rawPg = await postgresPool();
  await rawMysql.query(`CREATE TABLE IF NOT EXISTS ${TABLE} (id VARCHAR(64) PRIMARY KEY, note VARCHAR(255) NOT NULL)`);
  await rawPg.query(`CREATE TABLE IF NOT EXISTS ${TABLE} (id VARCHAR(64) PRIMARY KEY, note VARCHAR(255) NOT NULL)`);
  orms.push(...(await build()));
  // Each adapter creates the tables it uses (idempotent, and raced by the others' processes).
  for (const o of orms) {
    const tm = o.tm as unknown as { createTables(): Promise<void>; createOutboxTable(): Promise<void> };
    await tm.createTables();
    await tm.createOutboxTable();
  }
});
after(async () => {
  for (const o of orms) await o.close();
  await rawMysql.end();
  await rawPg.end();
});

async function count(dialect: 'mysql' | 'postgres', sql: string, params: unknown[]): Promise<number> {
  if (dialect === 'mysql') {
    const [rows] = await rawMysql.execute(sql.replace(/\$\d+/g, '?'), params as string[]);
    return Number((rows as Array<{ n: number }>)[0]!.n);
  }
  return Number((await rawPg.query<{ n: string }>(sql, params)).rows[0]!.n);
}
const orders = (d: 'mysql' | 'postgres', id: string): Promise<number> => count(d, `SELECT COUNT(*) AS n FROM ${TABLE} WHERE id = $1`, [id]);
const commitMarkers = (d: 'mysql' | 'postgres', bizId: string, key: string): Promise<number> =>
  count(d, "SELECT COUNT(*) AS n FROM trustmsg_barrier WHERE biz_id = $1 AND message_key = $2 AND op = 'commit'", [bizId, key]);

const NAMES = ['prisma/mysql', 'prisma/postgres', 'drizzle/mysql', 'drizzle/postgres', 'kysely/mysql', 'kysely/postgres', 'typeorm/mysql', 'typeorm/postgres'];
const orm = (name: string): Orm => {
  const o = orms.find((x) => x.name === name);
  if (!o) throw new Error(`no ORM ${name}`);
  return o;
};

for (const name of NAMES) {
  const tag = name.replace('/', '-');
  describe(name, { concurrency: true }, () => {
    test(`S01 a committed message reaches Kafka byte for byte (${name})`, async () => {
      const o = orm(name);
      const r = await register(`ts-s01-${tag}-${rand()}`, 'http://127.0.0.1:9/unused');
      const p = producerFor(r);
      const topic = `ts-orm-s01-${rand()}`;
      const key = `order-${rand()}`;
      const payload = new Uint8Array([0, 1, 0xff, 0x7b, 0x0a]);
      const result = await o.transaction(p, { message_key: key, topic, key: 'customer-7', payload }, async (insert) => {
        await insert(key, 'placed');
        return 42;
      });
      assert.equal(result.status, 'committed');
      assert.equal(result.value, 42);
      assert.equal(await orders(o.dialect, key), 1, 'the ORM inserted the order in the transaction');
      assert.equal(await commitMarkers(o.dialect, r.bizId, key), 1, 'with the commit marker');
      const records = await readTopic(topic, (rs) => ofMessage(rs, key).length > 0);
      const ours = ofMessage(records, key);
      assert.equal(ours.length, 1);
      assert.deepEqual(recordKey(ours[0]!), Buffer.from('customer-7'));
      assert.deepEqual(recordValue(ours[0]!), Buffer.from(payload));
    });

    test(`S02 a local transaction that fails is rolled back and never delivered (${name})`, async () => {
      const o = orm(name);
      const r = await register(`ts-s02-${tag}-${rand()}`, 'http://127.0.0.1:9/unused');
      const p = producerFor(r);
      const key = `order-${rand()}`;
      const thrown = new Error('payment declined');
      await assert.rejects(
        o.transaction(p, { message_key: key, topic: `ts-orm-s02-${rand()}`, payload: '{}' }, async (insert) => {
          await insert(key, 'not placed');
          throw thrown;
        }),
        (e: unknown) => e === thrown,
      );
      assert.equal(await orders(o.dialect, key), 0, 'the order rolled back with the ORM transaction');
      assert.equal(await commitMarkers(o.dialect, r.bizId, key), 0);
      assert.equal((await p.get(key)).status, 'ROLLED_BACK');
    });

    test(`S03 a producer that stops between its local commit and the commit call is committed by check-back (${name})`, async () => {
      const o = orm(name);
      const r = await register(`ts-s03-${tag}-${rand()}`, 'http://127.0.0.1:9/not-yet');
      const server = await checkServer('hono', { secret: r.secret, decide: o.tm.barrierDecider(), logger: quiet });
      try {
        await setVerifyUrl(r.bizId, server.url);
        const p = producerFor(r);
        const key = `order-${rand()}`;
        const stopped = new Error('the process stops here');
        await assert.rejects(
          o.transaction(
            p,
            { message_key: key, topic: `ts-orm-s03-${rand()}`, payload: 'crashed before commit' },
            (insert) => insert(key, 'placed'),
            () => {
              throw stopped;
            },
          ),
          (e: unknown) => e === stopped,
        );
        assert.equal((await p.get(key)).status, 'PREPARED');
        await viewWhen(p, key, (v) => v.status === 'COMMITTED', 30_000);
        assert.equal(await orders(o.dialect, key), 1);
      } finally {
        await server.close();
      }
    });

    test(`S07 the inbox drops a redelivered record and keeps the work atomic with it (${name})`, async () => {
      const o = orm(name);
      const group = `billing-${rand()}`;
      const id = `inbox-${rand()}`;
      const record = { headers: [['trustmsg-message-id', String(1_000_000 + Math.floor(Math.random() * 1e9))]] as Array<[string, string | null]> };
      // A failing first delivery rolls back with its inbox row: the next one runs the work again.
      await assert.rejects(
        o.processOnce(group, record, async (insert) => {
          await insert(id, 'half done');
          throw new Error('crashed mid-work');
        }),
        /crashed mid-work/,
      );
      assert.equal(await orders(o.dialect, id), 0);
      assert.deepEqual(await o.processOnce(group, record, (insert) => insert(id, 'billed').then(() => 'ok')), { status: 'done', value: 'ok' });
      assert.deepEqual(await o.processOnce(group, record, (insert) => insert(`${id}-again`, 'billed twice')), { status: 'repeat' });
      assert.equal(await orders(o.dialect, id), 1);
      assert.equal(await orders(o.dialect, `${id}-again`), 0);
    });

    test(`S09 the local message table, written in the ORM's own transaction (${name})`, async () => {
      const o = orm(name);
      const topic = `${kit.outboxTopicPrefix}ts-${tag}-${rand()}`;
      const committed = `order-${rand()}`;
      const rolledBack = `order-${rand()}`;
      await assert.rejects(
        o.inOwnTransaction(async (insert, enqueue) => {
          await insert(rolledBack, 'never');
          await enqueue({ message_key: rolledBack, topic, payload: 'never' });
          throw new Error('rolled back');
        }),
        /rolled back/,
      );
      const id = await o.inOwnTransaction(async (insert, enqueue) => {
        await insert(committed, 'placed');
        return enqueue({ message_key: committed, topic, key: 'customer-7', payload: new Uint8Array([0, 0xff, 0x7b]), headers: { source: 'orders' } });
      });
      assert.ok(id > 0n, `the row's id (${id})`);
      assert.equal(await count(o.dialect, 'SELECT COUNT(*) AS n FROM trustmsg_outbox WHERE message_key = $1', [rolledBack]), 0);
      assert.equal(await count(o.dialect, 'SELECT COUNT(*) AS n FROM trustmsg_outbox WHERE message_key = $1 AND id = $2', [committed, id.toString()]), 1);
      await assert.rejects(
        o.inOwnTransaction((_insert, enqueue) => enqueue({ message_key: committed, topic, payload: 'again' })),
        DuplicateMessageError,
      );
      if (o.dialect === 'mysql') {
        // The kit relays the MariaDB database's table (PostgreSQL sources are not relayed by the kit).
        const records = await readTopic(topic, (rs) => ofMessage(rs, committed).length > 0);
        assert.equal(ofMessage(records, committed).length, 1);
        assert.deepEqual(recordValue(ofMessage(records, committed)[0]!), Buffer.from([0, 0xff, 0x7b]));
        assert.equal(ofMessage(records, rolledBack).length, 0);
      }
    });

    test(`S13 two identical requests for one order at the same moment make one local commit and one message (${name})`, async () => {
      const o = orm(name);
      const r = await register(`ts-s13-${tag}-${rand()}`, 'http://127.0.0.1:9/unused');
      const key = `order-${rand()}`;
      const m = { message_key: key, topic: `ts-orm-s13-${rand()}`, payload: 'once' };
      const place = (): Promise<TransactionResult<string, MessageView>> =>
        o.transaction(producerFor(r), m, async (insert) => {
          await insert(`${key}-${rand()}`, 'placed');
          // Slow enough for the two to overlap.
          await new Promise((done) => setTimeout(done, 300));
          return 'placed';
        });
      const calls = await Promise.allSettled([place(), place()]);
      const placed = calls.filter((c) => c.status === 'fulfilled' && c.value.status === 'committed');
      const already = calls.filter((c) => c.status === 'rejected' && c.reason instanceof AlreadyCommittedError);
      assert.equal(placed.length + already.length, 2, calls.map((c) => (c.status === 'rejected' ? String(c.reason) : c.value.status)).join(', '));
      assert.ok(placed.length >= 1, 'one call placed the order');
      assert.equal(await count(o.dialect, `SELECT COUNT(*) AS n FROM ${TABLE} WHERE id LIKE $1`, [`${key}-%`]), 1, 'one local commit');
      assert.equal(await commitMarkers(o.dialect, r.bizId, key), 1);
      assert.equal((await producerFor(r).get(key)).status, 'COMMITTED');
    });
  });
}
