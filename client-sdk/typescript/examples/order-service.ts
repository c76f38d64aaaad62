// An order service on trustmsg: each order and its "order placed" message are
// stored together. The order is written in a local transaction with the
// barrier's marker; the message is prepared before and committed after, and
// check-back is answered from the barrier. Run it against `trustmsg dev`
// (client-sdk/typescript/README.md says how):
//
//   POST /orders          {"order_id","customer","amount_cents","fail"?,"lose_commit"?}
//   POST /trustmsg/check  trustmsg's check-back (signed; answered from the barrier)
import express from 'express';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Producer, type Message, type MessageView, type TransactionResult } from '@trustmsg/client';
import { checkBackExpress } from '@trustmsg/client/express';
import * as mysqlBarrier from '@trustmsg/client/mysql';
import * as pgBarrier from '@trustmsg/client/postgres';

const env = (name: string, fallback?: string): string => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) {
    console.error(`${name} is not set: run \`. trustmsg-dev/env\` first (trustmsg dev writes it)`);
    process.exit(2);
  }
  return v;
};

const producer = new Producer({
  baseURL: env('TRUSTMSG_URL', 'http://127.0.0.1:8080'),
  bizId: env('TRUSTMSG_DEMO_BIZ_ID', 'order-service'),
  token: env('TRUSTMSG_DEMO_TOKEN'),
});
const secret = env('TRUSTMSG_DEMO_SIGNING_SECRET');
const databaseUrl = env('DATABASE_URL', 'mysql://root@127.0.0.1:3306/order_service');
const topic = env('ORDERS_TOPIC', 'orders');

/** The same service on MySQL/MariaDB or PostgreSQL, whichever DATABASE_URL names. */
interface Store {
  placeOrder(message: Message, order: Order): Promise<TransactionResult<string, MessageView>>;
  /** The local transaction alone, as if the process stopped before the commit call. */
  storeOnly(order: Order): Promise<void>;
  decide: ReturnType<typeof mysqlBarrier.barrierDecider>;
  close(): Promise<void>;
}

interface Order {
  order_id: string;
  customer: string;
  amount_cents: number;
  fail?: boolean;
  lose_commit?: boolean;
}

class PaymentDeclined extends Error {}

function charge(order: Order): void {
  if (order.fail) throw new PaymentDeclined(`payment declined for ${order.customer}`);
}

async function openStore(): Promise<Store> {
  if (databaseUrl.startsWith('postgres')) {
    const pool = new pg.Pool({ connectionString: databaseUrl });
    await pgBarrier.createTables(pool);
    await pool.query('CREATE TABLE IF NOT EXISTS orders (order_id VARCHAR(64) PRIMARY KEY, customer VARCHAR(255) NOT NULL, amount_cents BIGINT NOT NULL)');
    const insert = async (client: pg.PoolClient, o: Order): Promise<void> => {
      await client.query('INSERT INTO orders (order_id, customer, amount_cents) VALUES ($1, $2, $3)', [o.order_id, o.customer, o.amount_cents]);
      charge(o);
    };
    return {
      placeOrder: (message, o) => pgBarrier.transaction(producer, pool, message, async (client) => (await insert(client, o), o.order_id)),
      storeOnly: (o) => pgBarrier.runInTransaction(pool, producer.bizId, o.order_id, (client) => insert(client, o)),
      decide: pgBarrier.barrierDecider(pool),
      close: () => pool.end(),
    };
  }
  const pool = mysql.createPool(databaseUrl);
  await mysqlBarrier.createTables(pool);
  await pool.query('CREATE TABLE IF NOT EXISTS orders (order_id VARCHAR(64) PRIMARY KEY, customer VARCHAR(255) NOT NULL, amount_cents BIGINT NOT NULL)');
  const insert = async (conn: mysql.PoolConnection, o: Order): Promise<void> => {
    await conn.execute('INSERT INTO orders (order_id, customer, amount_cents) VALUES (?, ?, ?)', [o.order_id, o.customer, o.amount_cents]);
    charge(o);
  };
  return {
    placeOrder: (message, o) => mysqlBarrier.transaction(producer, pool, message, async (conn) => (await insert(conn, o), o.order_id)),
    storeOnly: (o) => mysqlBarrier.runInTransaction(pool, producer.bizId, o.order_id, (conn) => insert(conn, o)),
    decide: mysqlBarrier.barrierDecider(pool),
    close: () => pool.end(),
  };
}

const store = await openStore();
const app = express();

// Before express.json(): the check-back signature covers the raw body.
app.post('/trustmsg/check', checkBackExpress({ secret, decide: store.decide }));
app.use(express.json());

app.post('/orders', async (req, res) => {
  const order = req.body as Order;
  if (typeof order.order_id !== 'string' || typeof order.customer !== 'string' || !Number.isInteger(order.amount_cents)) {
    res.status(400).json({ message: 'give {"order_id": string, "customer": string, "amount_cents": integer}' });
    return;
  }
  const message: Message = {
    message_key: order.order_id,
    topic,
    key: order.customer,
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ event: 'order_placed', order_id: order.order_id, customer: order.customer, amount_cents: order.amount_cents }),
  };
  try {
    if (order.lose_commit) {
      await producer.prepare(message);
      await store.storeOnly(order);
      res.status(202).json({ message: 'order stored, commit call skipped: trustmsg will ask /trustmsg/check', order_id: order.order_id });
      return;
    }
    const result = await store.placeOrder(message, order);
    if (result.status === 'committed') {
      res.status(201).json({ message: 'committed', message_id: result.receipt.id.toString(), order_id: order.order_id });
    } else {
      // The order is stored; trustmsg settles the message by check-back.
      res.status(202).json({ message: result.status, order_id: order.order_id, detail: result.error.message });
    }
  } catch (e) {
    const status = e instanceof PaymentDeclined ? 422 : 500;
    res.status(status).json({ message: 'order not placed; message rolled back', order_id: order.order_id, detail: String(e) });
  }
});

const server = app.listen(Number(env('PORT', '3000')), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  console.log(`order-service listening on http://127.0.0.1:${port} (check-back at /trustmsg/check)`);
});

const stop = (): void => {
  server.close();
  void store.close();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
