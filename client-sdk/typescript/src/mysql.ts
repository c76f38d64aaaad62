/**
 * The barrier, the transaction helper, the inbox and the local message table
 * on MySQL ≥ 8.0 / MariaDB ≥ 10.6 through `mysql2` (its promise API: pass
 * `mysql.createPool(…)` of `mysql2/promise`, or `pool.promise()`).
 *
 * ```ts
 * import mysql from 'mysql2/promise';
 * import { createTables, transaction, barrierDecider } from '@trustmsg/client/mysql';
 *
 * const pool = mysql.createPool('mysql://root@127.0.0.1:3306/shop');
 * await createTables(pool);
 * const result = await transaction(producer, pool, { message_key: 'order-42', topic: 'orders', payload }, async (conn) => {
 *   await conn.execute('INSERT INTO orders (id, total) VALUES (?, ?)', [42, 1250]);
 *   return 42;
 * });
 * ```
 *
 * Keys compare byte for byte (VARBINARY): `"A"` and `"A "` are two messages.
 */
import type { Pool, PoolConnection } from 'mysql2/promise';
import * as core from './sql/core.js';
import { MYSQL } from './sql/dialects.js';
import type { TransactionOptions, TransactionResult, WayIn } from './transaction.js';
import type { CheckRequest, Message } from './types.js';

export type { Processed, InboxSubject } from './sql/core.js';
export { BARRIER_INBOX_MYSQL as SCHEMA, OUTBOX_MYSQL as OUTBOX_SCHEMA } from './sql/schema.js';

const dialect: core.Dialect<Pool, PoolConnection> = {
  ...MYSQL,
  async acquire(pool) {
    const conn = await pool.getConnection();
    return {
      conn,
      release(broken) {
        if (broken) conn.destroy();
        else conn.release();
      },
    };
  },
  async run(conn, sql, params) {
    const [result] = params && params.length > 0 ? await conn.execute(sql, params as Parameters<PoolConnection['execute']>[1]) : await conn.query(sql);
    if (Array.isArray(result)) return { rows: result as Array<Record<string, unknown>>, affected: 0 };
    const header = result as { affectedRows?: number; insertId?: number | string };
    return {
      rows: [],
      affected: header.affectedRows ?? 0,
      insertId: header.insertId === undefined ? undefined : BigInt(header.insertId),
    };
  },
  isUniqueViolation(e) {
    const err = e as { code?: unknown; errno?: unknown } | null;
    return err?.code === 'ER_DUP_ENTRY' || err?.errno === 1062;
  },
};

/** Creates the barrier and inbox tables if they do not exist (the contract kit's `sql/mysql.sql`). */
export function createTables(pool: Pool): Promise<void> {
  return core.createTables(dialect, pool);
}

/** Creates the local message table (`trustmsg outbox schema --dialect mysql`). On MySQL, DDL commits an open transaction: call it at start-up. */
export function createOutboxTable(pool: Pool, table?: string): Promise<void> {
  return core.createOutboxTable(dialect, pool, table);
}

/** Inserts the barrier's `commit` marker in the caller's open transaction; {@link AlreadyDecidedError} when a marker exists. */
export function insertMarker(conn: PoolConnection, bizId: string, messageKey: string): Promise<void> {
  return core.insertMarker(dialect, conn, bizId, messageKey);
}

/** The barrier's answer to a check-back of `(bizId, messageKey)`; waits while its local transaction is open. */
export function checkMarker(pool: Pool, bizId: string, messageKey: string): Promise<'commit' | 'rollback'> {
  return core.checkMarker(dialect, pool, bizId, messageKey);
}

/** A check-back decider answering from the barrier: `checkBackFetchHandler({ secret, decide: barrierDecider(pool) })`. */
export function barrierDecider(pool: Pool): (request: CheckRequest) => Promise<'commit' | 'rollback'> {
  return core.barrierDecider(dialect, pool);
}

/** Runs `work` in a local transaction that first inserts the `commit` marker; rethrows `work`'s own error after the rollback. */
export function runInTransaction<T>(pool: Pool, bizId: string, messageKey: string, work: (conn: PoolConnection) => Promise<T>): Promise<T> {
  return core.runInTransaction(dialect, pool, bizId, messageKey, work);
}

/**
 * Prepare → local transaction with the barrier → commit; on failure, rollback
 * and `work`'s own error rethrown. `way` is a `Producer` (HTTP) or a
 * `Submitter` (Kafka). `work` runs only for a message prepared now: a message
 * already decided (prepare's answer, or the barrier's marker of an earlier
 * run, whose decision is then sent) throws `AlreadyCommittedError` or
 * `AlreadyRolledBackError` without running it. A failed `work` leaves the
 * barrier's `rollback` marker, written before the rollback is sent; if an
 * identical request committed first, the commit is sent instead and the
 * helper throws `AlreadyCommittedError`. `options.afterLocalCommit` is the
 * test hook at the crash point.
 */
export function transaction<T, R>(
  way: WayIn<R>,
  pool: Pool,
  message: Message,
  work: (conn: PoolConnection, prepared: R) => Promise<T>,
  options?: TransactionOptions,
): Promise<TransactionResult<T, R>> {
  return core.transaction(dialect, way, pool, message, work, options);
}

/** Runs `work` once per `(group, message id)`, in one transaction with the inbox row. */
export function processOnce<T>(pool: Pool, group: string, subject: core.InboxSubject, work: (conn: PoolConnection) => Promise<T>): Promise<core.Processed<T>> {
  return core.processOnce(dialect, pool, group, subject, work);
}

/** Writes `message` to the local message table through `conn` (your open transaction); returns the row's id. */
export function enqueue(conn: PoolConnection, message: Message, options: { table?: string } = {}): Promise<bigint> {
  return core.enqueue(dialect, conn, message, options.table);
}

/** Deletes barrier markers older than `ageMs` (keep them longer than a message can stay undecided). */
export function purgeBarrier(pool: Pool, ageMs: number): Promise<number> {
  return core.purgeBarrier(dialect, pool, ageMs);
}
