// An order service on trustmsg: each order and its "order placed" message are
// stored together. The order is written in a local transaction with the
// barrier's marker; the message is prepared before and committed after, and
// check-back is answered from the barrier. Run it against `trustmsg dev`
// (client-sdk/typescript/README.md says how):
//
//   POST /orders          {"order_id","customer","amount_cents","fail"?,"lose_commit"?}
//   POST /trustmsg/check  trustmsg's check-back (signed; answered from the barrier)
//
// A client may send an order again (its connection dropped): an order placed
// before is answered 200 "already placed", one rolled back before 409
// "refused", and neither runs the local transaction again.
import express from 'express';
import mysql from 'mysql2/promise';
import pg from 'pg';
import {
  AlreadyCommittedError,
  AlreadyRolledBackError,
  Producer,
  UnavailableError,
  type Message,
  type MessageView,
  type TransactionResult,
  type TransactionOptions,
} from '@trustmsg/client';
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
  placeOrder(message: Message, order: Order, options: TransactionOptions): Promise<TransactionResult<string, MessageView>>;
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
/** Thrown by the afterLocalCommit hook: the process "stops" between its local commit and the commit call. */
class CommitSkipped extends Error {}

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
      placeOrder: (message, o, options) => pgBarrier.transaction(producer, pool, message, async (client) => (await insert(client, o), o.order_id), options),
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
    placeOrder: (message, o, options) => mysqlBarrier.transaction(producer, pool, message, async (conn) => (await insert(conn, o), o.order_id), options),
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
  // lose_commit: the SDK's test hook stops the call right after the local COMMIT, before the commit call.
  const afterLocalCommit = order.lose_commit
    ? () => {
        throw new CommitSkipped();
      }
    : undefined;
  try {
    const result = await store.placeOrder(message, order, { afterLocalCommit });
    if (result.status === 'committed') {
      res.status(201).json({ message: 'committed', message_id: result.receipt.id.toString(), order_id: order.order_id });
    } else {
      // The order is stored; trustmsg could not be reached, and settles the message by check-back.
      res.status(202).json({ message: result.status, order_id: order.order_id, detail: result.error.message });
    }
  } catch (e) {
    if (e instanceof CommitSkipped) {
      res.status(202).json({ message: 'order stored, commit call skipped: trustmsg will ask /trustmsg/check', order_id: order.order_id });
    } else if (e instanceof AlreadyCommittedError) {
      // A retry of an order placed before: nothing was written now (the helper sent a commit it had missed).
      res.status(200).json({ message: 'already placed', order_id: order.order_id });
    } else if (e instanceof AlreadyRolledBackError) {
      // Its message was rolled back before: this order id can never be placed. Not a 503: retrying cannot help.
      res.status(409).json({ message: 'refused: this order was rolled back; place it again under a new order id', order_id: order.order_id });
    } else if (e instanceof PaymentDeclined) {
      res.status(422).json({ message: 'order not placed; message rolled back', order_id: order.order_id, detail: String(e) });
    } else if (e instanceof UnavailableError) {
      res.status(503).json({ message: 'trustmsg unavailable; nothing stored: try again', order_id: order.order_id });
    } else {
      res.status(500).json({ message: 'order failed', order_id: order.order_id, detail: String(e) });
    }
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
