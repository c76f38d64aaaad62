// S09: the local message table. The kit relays TRUSTMSG_KIT_MYSQL_URL's
// trustmsg_outbox for TRUSTMSG_KIT_OUTBOX_BIZ_ID; PostgreSQL sources are not
// relayed by trustmsg yet, so there the row enqueue writes is what is checked.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type mysql from 'mysql2/promise';
import type pg from 'pg';
import { BadRequestError, DuplicateMessageError, type Message } from '../../src/index.js';
import * as my from '../../src/mysql.js';
import * as pgsdk from '../../src/postgres.js';
import { vectors } from '../vectors.js';
import { eventually, kit, mysqlPool, ofMessage, postgresPool, rand, readTopic, recordHeaders, recordKey, recordValue } from '../kit.js';

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

interface OutboxMessage {
  message_key: string;
  topic: string;
  payload_base64: string;
  key?: string;
  headers?: Record<string, string>;
  traceparent?: string;
  deliver_after_ms?: number;
}
interface Vectors {
  valid: Array<{
    name: string;
    message: OutboxMessage;
    row: {
      record_key: string | null;
      payload_base64: string;
      headers: Record<string, string> | null;
      traceparent: string | null;
      deliver: { after_ms: number } | null;
    };
  }>;
  invalid: Array<{ name: string; message: OutboxMessage; error: string }>;
}

function message(m: OutboxMessage, key: string): Message {
  return {
    message_key: key,
    topic: m.topic,
    payload: new Uint8Array(Buffer.from(m.payload_base64, 'base64')),
    key: m.key,
    headers: m.headers,
    traceparent: m.traceparent,
    deliver_after_ms: m.deliver_after_ms,
  };
}

test('S09 the local message table delivers (mysql)', async () => {
  const topic = `${kit.outboxTopicPrefix}ts-${rand()}`;
  const committed = `order-${rand()}`;
  const rolledBack = `order-${rand()}`;
  const payload = new Uint8Array([0, 0xff, 0x7b, 0x22]);

  const conn = await mysqlDb.getConnection();
  try {
    // First the row whose transaction rolls back…
    await conn.query('BEGIN');
    await my.enqueue(conn, { message_key: rolledBack, topic, payload: 'never' });
    await conn.query('ROLLBACK');
    // …then the one whose transaction commits.
    await conn.query('BEGIN');
    const id = await my.enqueue(conn, {
      message_key: committed,
      topic,
      key: 'customer-7',
      payload,
      headers: { source: 'orders', 'content-type': 'application/octet-stream' },
    });
    assert.ok(id > 0n);
    await assert.rejects(my.enqueue(conn, { message_key: committed, topic, payload: 'again' }), DuplicateMessageError);
    await conn.query('COMMIT');
  } finally {
    conn.release();
  }

  const records = await readTopic(topic, (rs) => ofMessage(rs, committed).length > 0);
  const rec = ofMessage(records, committed);
  assert.equal(rec.length, 1);
  assert.deepEqual(recordKey(rec[0]!), Buffer.from('customer-7'));
  assert.deepEqual(recordValue(rec[0]!), Buffer.from(payload));
  const headers = recordHeaders(rec[0]!);
  assert.ok(headers.some(([k, v]) => k === 'source' && v === 'orders'));
  assert.ok(headers.some(([k, v]) => k === 'content-type' && v === 'application/octet-stream'));
  assert.ok(headers.some(([k, v]) => k === 'trustmsg-biz-id' && v === kit.outboxBizId));
  assert.equal(ofMessage(records, rolledBack).length, 0, 'the rolled-back row never reaches Kafka');
  await eventually('the row to be marked relayed', async () => {
    const [rows] = await mysqlDb.execute('SELECT status FROM trustmsg_outbox WHERE message_key = ?', [committed]);
    return (rows as Array<{ status: number }>)[0]?.status === 2 ? true : undefined;
  });
  const [gone] = await mysqlDb.execute('SELECT COUNT(*) AS n FROM trustmsg_outbox WHERE message_key = ?', [rolledBack]);
  assert.equal(Number((gone as Array<{ n: number }>)[0]!.n), 0, 'the rolled-back row never exists');
});

/** Reads back the columns enqueue wrote, and what deliver_at is relative to the database's clock. */
interface Written {
  message_key: string;
  topic: string;
  record_key: string | null;
  payload: Buffer;
  headers: unknown;
  traceparent: string | null;
  deliver_after_ms: number | null;
  status: number;
}

for (const dbName of ['mysql', 'postgres'] as const) {
  test(`S09 every case of outbox-rows.json writes that row or is refused with that code (${dbName})`, async () => {
    const table = `ts_outbox_${rand()}`;
    const v = vectors<Vectors>('outbox-rows.json');
    const enqueue = async (m: Message): Promise<Written> => {
      if (dbName === 'mysql') {
        const conn = await mysqlDb.getConnection();
        try {
          await conn.query('BEGIN');
          const id = await my.enqueue(conn, m, { table });
          await conn.query('COMMIT');
          const [rows] = await mysqlDb.execute(
            `SELECT message_key, topic, record_key, payload, headers, traceparent, status, ` +
              `TIMESTAMPDIFF(MICROSECOND, gmt_create, deliver_at) DIV 1000 AS deliver_after_ms FROM ${table} WHERE id = ?`,
            [id.toString()],
          );
          const row = (rows as Array<Record<string, unknown>>)[0]!;
          const h = row['headers'];
          return {
            ...(row as unknown as Written),
            headers: typeof h === 'string' ? JSON.parse(h) : h,
            deliver_after_ms: row['deliver_after_ms'] === null ? null : Number(row['deliver_after_ms']),
          };
        } finally {
          conn.release();
        }
      }
      const client = await pgDb.connect();
      try {
        await client.query('BEGIN');
        const id = await pgsdk.enqueue(client, m, { table });
        await client.query('COMMIT');
        const { rows } = await pgDb.query<Written & { deliver_after_ms: string | null }>(
          `SELECT message_key, topic, record_key, payload, headers, traceparent, status, ` +
            `(EXTRACT(EPOCH FROM (deliver_at - gmt_create)) * 1000)::bigint AS deliver_after_ms FROM ${table} WHERE id = $1`,
          [id.toString()],
        );
        const row = rows[0]!;
        return { ...row, deliver_after_ms: row.deliver_after_ms === null ? null : Number(row.deliver_after_ms) };
      } finally {
        client.release();
      }
    };
    if (dbName === 'mysql') await my.createOutboxTable(mysqlDb, table);
    else await pgsdk.createOutboxTable(pgDb, table);
    try {
      for (const c of v.valid) {
        const key = `${c.message.message_key}-${rand()}`;
        const row = await enqueue(message(c.message, key));
        assert.deepEqual(
          {
            message_key: row.message_key,
            topic: row.topic,
            record_key: row.record_key,
            payload_base64: Buffer.from(row.payload).toString('base64'),
            headers: row.headers,
            traceparent: row.traceparent,
            status: row.status,
          },
          {
            record_key: c.row.record_key,
            payload_base64: c.row.payload_base64,
            headers: c.row.headers,
            traceparent: c.row.traceparent,
            message_key: key,
            topic: c.message.topic,
            status: 0,
          },
          c.name,
        );
        if (c.row.deliver === null) assert.equal(row.deliver_after_ms, null, c.name);
        else assert.ok(Math.abs(row.deliver_after_ms! - c.row.deliver.after_ms) < 2000, `${c.name}: deliver_at ${row.deliver_after_ms} ms after the insert`);
      }
      for (const c of v.invalid) {
        await assert.rejects(enqueue(message(c.message, c.message.message_key)), (e: unknown) => e instanceof BadRequestError && e.code === c.error, c.name);
      }
      const count =
        dbName === 'mysql'
          ? Number(((await mysqlDb.query(`SELECT COUNT(*) AS n FROM ${table}`))[0] as Array<{ n: number }>)[0]!.n)
          : Number((await pgDb.query<{ n: string }>(`SELECT COUNT(*) AS n FROM ${table}`)).rows[0]!.n);
      assert.equal(count, v.valid.length, 'nothing written for a refused message');
    } finally {
      if (dbName === 'mysql') await mysqlDb.query(`DROP TABLE ${table}`);
      else await pgDb.query(`DROP TABLE ${table}`);
    }
  });
}
