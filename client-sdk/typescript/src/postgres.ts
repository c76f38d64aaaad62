/**
 * The barrier, the transaction helper, the inbox and the local message table
 * on PostgreSQL ≥ 13 through `pg`.
 *
 * ```ts
 * import pg from 'pg';
 * import { createTables, transaction, barrierDecider } from '@trustmsg/client/postgres';
 *
 * const pool = new pg.Pool({ connectionString: 'postgres://postgres:postgres@127.0.0.1:5432/shop' });
 * await createTables(pool);
 * const result = await transaction(producer, pool, { message_key: 'order-42', topic: 'orders', payload }, async (client) => {
 *   await client.query('INSERT INTO orders (id, total) VALUES ($1, $2)', [42, 1250]);
 *   return 42;
 * });
 * ```
 *
 * Keys compare byte for byte (COLLATE "C"). In PostgreSQL a failed statement
 * aborts the transaction: after a {@link DuplicateMessageError} of `enqueue`,
 * roll back.
 */
import type { Pool, PoolClient } from 'pg';
import * as core from './sql/core.js';
import { POSTGRES } from './sql/dialects.js';
import type { TransactionOptions, TransactionResult, WayIn } from './transaction.js';
import type { CheckRequest, Message } from './types.js';

export type { Processed, InboxSubject } from './sql/core.js';
export { BARRIER_INBOX_POSTGRES as SCHEMA, OUTBOX_POSTGRES as OUTBOX_SCHEMA } from './sql/schema.js';

const dialect: core.Dialect<Pool, PoolClient> = {
  ...POSTGRES,
  async acquire(pool) {
    const conn = await pool.connect();
    return {
      conn,
      release(broken) {
        conn.release(broken === true ? true : undefined);
      },
    };
  },
  async run(conn, sql, params) {
    const result = await conn.query(sql, params);
    const first = result.rows[0] as Record<string, unknown> | undefined;
    const id = first?.['id'];
    return {
      rows: result.rows as Array<Record<string, unknown>>,
      affected: result.rowCount ?? 0,
      insertId: typeof id === 'string' || typeof id === 'number' || typeof id === 'bigint' ? BigInt(id) : undefined,
    };
  },
  isUniqueViolation(e) {
    return (e as { code?: unknown } | null)?.code === '23505';
  },
};

/** Creates the barrier and inbox tables if they do not exist (the contract kit's `sql/postgres.sql`). */
export function createTables(pool: Pool): Promise<void> {
  return core.createTables(dialect, pool);
}

/** Creates the local message table (`trustmsg outbox schema --dialect postgres`). */
export function createOutboxTable(pool: Pool, table?: string): Promise<void> {
  return core.createOutboxTable(dialect, pool, table);
}

/** Inserts the barrier's `commit` marker in the caller's open transaction; {@link AlreadyDecidedError} when a marker exists. */
export function insertMarker(client: PoolClient, bizId: string, messageKey: string): Promise<void> {
  return core.insertMarker(dialect, client, bizId, messageKey);
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
export function runInTransaction<T>(pool: Pool, bizId: string, messageKey: string, work: (client: PoolClient) => Promise<T>): Promise<T> {
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
  work: (client: PoolClient, prepared: R) => Promise<T>,
  options?: TransactionOptions,
): Promise<TransactionResult<T, R>> {
  return core.transaction(dialect, way, pool, message, work, options);
}

/** Runs `work` once per `(group, message id)`, in one transaction with the inbox row. */
export function processOnce<T>(pool: Pool, group: string, subject: core.InboxSubject, work: (client: PoolClient) => Promise<T>): Promise<core.Processed<T>> {
  return core.processOnce(dialect, pool, group, subject, work);
}

/**
 * Writes `message` to the local message table through `client` (your open
 * transaction); returns the row's id. `trustmsg serve --outbox-source
 * BIZ_ID=postgres://…` relays the table.
 */
export function enqueue(client: PoolClient, message: Message, options: { table?: string } = {}): Promise<bigint> {
  return core.enqueue(dialect, client, message, options.table);
}

/** Deletes barrier markers older than `ageMs`. */
export function purgeBarrier(pool: Pool, ageMs: number): Promise<number> {
  return core.purgeBarrier(dialect, pool, ageMs);
}
