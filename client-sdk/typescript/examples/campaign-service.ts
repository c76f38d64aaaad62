// The order service of the producer campaign (client-sdk/conformance/campaign.md),
// written from this SDK's README: each order and its "order created" message
// stored together through the barrier's transaction helper, the check-back
// endpoint answered from the barrier, and every outcome of the helper mapped
// to what the client is told. `examples/campaign-service` builds and runs it.
import express from 'express';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { AlreadyCommittedError, AlreadyRolledBackError, OutcomeUnknownError, Producer, UnavailableError, type Message } from '@trustmsg/client';
import { checkBackExpress } from '@trustmsg/client/express';
import * as mysqlBarrier from '@trustmsg/client/mysql';
import * as pgBarrier from '@trustmsg/client/postgres';

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined || v === '') throw new Error(`${name} is not set (campaign.md lists what the service is given)`);
  return v;
};

const producer = new Producer({ baseURL: env('TRUSTMSG_URL'), bizId: env('TRUSTMSG_BIZ_ID'), token: env('TRUSTMSG_TOKEN') });
const databaseUrl = env('DATABASE_URL');
const topic = env('ORDERS_TOPIC');

interface Order {
  order_id: string;
  amount_cents: number;
  fail?: boolean;
  crash_after_local_commit?: boolean;
  crash_before_answer?: boolean;
}

class BusinessStepFailed extends Error {}

/** Stops the process at once: no cleanup, no answer (what a power cut does). */
function crash(): never {
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable');
}

const ORDERS = 'CREATE TABLE IF NOT EXISTS orders (order_id VARCHAR(64) PRIMARY KEY, amount_cents BIGINT NOT NULL)';
type Place = (message: Message, order: Order, afterLocalCommit?: () => void) => Promise<bigint>;

/** The barrier helper on the database DATABASE_URL names; resolves to the message id. */
async function openDatabase(): Promise<{ place: Place; decide: ReturnType<typeof mysqlBarrier.barrierDecider> }> {
  if (databaseUrl.startsWith('postgres')) {
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 20 });
    await pgBarrier.createTables(pool);
    await pool.query(ORDERS);
    const place: Place = async (message, order, afterLocalCommit) => {
      const result = await pgBarrier.transaction(
        producer,
        pool,
        message,
        async (client) => {
          await client.query('INSERT INTO orders (order_id, amount_cents) VALUES ($1, $2)', [order.order_id, order.amount_cents]);
          if (order.fail) throw new BusinessStepFailed(`order ${order.order_id} failed`);
        },
        { afterLocalCommit },
      );
      return result.prepared.id;
    };
    return { place, decide: pgBarrier.barrierDecider(pool) };
  }
  const pool = mysql.createPool({ uri: databaseUrl, connectionLimit: 20 });
  await mysqlBarrier.createTables(pool);
  await pool.query(ORDERS);
  const place: Place = async (message, order, afterLocalCommit) => {
    const result = await mysqlBarrier.transaction(
      producer,
      pool,
      message,
      async (conn) => {
        await conn.execute('INSERT INTO orders (order_id, amount_cents) VALUES (?, ?)', [order.order_id, order.amount_cents]);
        if (order.fail) throw new BusinessStepFailed(`order ${order.order_id} failed`);
      },
      { afterLocalCommit },
    );
    return result.prepared.id;
  };
  return { place, decide: mysqlBarrier.barrierDecider(pool) };
}

/** A database error after which nothing is stored and a retry may succeed. */
function databaseBusy(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return ['ECONNREFUSED', 'ECONNRESET', 'PROTOCOL_CONNECTION_LOST', 'ER_LOCK_DEADLOCK', 'ER_LOCK_WAIT_TIMEOUT', '40P01', '40001'].includes(String(code));
}

/** What the client is told when the helper threw. */
function answerFor(e: unknown): [number, object] {
  if (e instanceof AlreadyCommittedError) return [200, { status: 'already_placed' }];
  if (e instanceof AlreadyRolledBackError) return [409, { status: 'refused' }];
  if (e instanceof BusinessStepFailed) return [422, { status: 'failed' }];
  // OutcomeUnknownError: the barrier decides; a retry reads it (already placed, or refused).
  if (e instanceof UnavailableError || e instanceof OutcomeUnknownError || databaseBusy(e)) return [503, { status: 'unavailable' }];
  console.error('order failed', e);
  return [500, { status: 'error', detail: String(e) }];
}

const db = await openDatabase();
const app = express();
// Before express.json(): the check-back signature covers the raw body.
app.post('/trustmsg/check', checkBackExpress({ secret: env('TRUSTMSG_SIGNING_SECRET'), decide: db.decide }));
app.use(express.json());
app.get('/health', (_req, res) => res.json({ status: 'ok' }));

app.post('/orders', async (req, res) => {
  const order = req.body as Order;
  const message: Message = {
    message_key: `order-${order.order_id}`,
    topic,
    key: order.order_id,
    payload: JSON.stringify({ order_id: order.order_id, amount_cents: order.amount_cents }),
  };
  let status = 201;
  let body = '';
  try {
    const id = await db.place(message, order, order.crash_after_local_commit ? crash : undefined);
    body = `{"status":"placed","message_id":${id}}`; // every digit of the 64-bit id
  } catch (e) {
    const [s, b] = answerFor(e);
    [status, body] = [s, JSON.stringify(b)];
  }
  if (order.crash_before_answer) crash();
  res.status(status).type('json').send(body);
});

app.listen(Number(env('PORT')), '127.0.0.1', () => {
  console.log(`campaign order service on 127.0.0.1:${env('PORT')}`);
});
