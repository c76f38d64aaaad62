/**
 * The barrier, the inbox and the local message table on the producer's own
 * database, written once for MySQL/MariaDB (mysql2) and PostgreSQL (pg): each
 * dialect gives its connections and statements; every value is bound as a
 * parameter, never formatted into SQL.
 */
import { AlreadyDecidedError, ConfigError, DuplicateMessageError, NoMessageIdError, OutcomeUnknownError } from '../errors.js';
import { messageIdOf, type RecordHeaders } from '../headers.js';
import { toLogger } from '../logger.js';
import { checkTable, outboxRowWithTrace, OUTBOX_TABLE } from '../outbox.js';
import { runTransaction, type TransactionOptions, type TransactionResult, type WayIn } from '../transaction.js';
import type { CheckRequest, Message } from '../types.js';

/** What a statement did. */
export interface Result {
  rows: Array<Record<string, unknown>>;
  affected: number;
  insertId?: bigint | undefined;
}

/** One database: how to get a connection and run a statement on it. */
export interface Dialect<Pool, Conn> {
  name: 'mysql' | 'postgres';
  acquire(pool: Pool): Promise<{ conn: Conn; release: (broken?: boolean) => void }>;
  run(conn: Conn | Pool, sql: string, params?: unknown[]): Promise<Result>;
  isUniqueViolation(e: unknown): boolean;
  /** How a barrier key or group is bound (bytes on MySQL's VARBINARY, text on PostgreSQL's COLLATE "C"). */
  key(v: string): unknown;
  schema: string;
  outboxSchema: string;
  /** Taken in the transaction that creates tables, where two processes creating them at once would race (PostgreSQL). */
  ddlLock?: string;
  sql: {
    barrierCommit: string;
    barrierRollback: string;
    barrierRead: string;
    barrierLockedRead: string;
    inboxInsert: string;
    purgeBarrier: string;
    outboxInsert(table: string): string;
  };
  /** deliver_at as the dialect binds it. */
  dueParams(due: { at: Date } | { afterMs: number } | null): [unknown, unknown];
}

/** The statements of a schema file, comments left out. */
export function statements(script: string): string[] {
  return script
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n')
    .split(';')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

export function opOf(v: unknown): 'commit' | 'rollback' {
  const s = Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
  if (s === 'commit' || s === 'rollback') return s;
  throw new Error(`unexpected barrier marker ${JSON.stringify(s)} in trustmsg_barrier`);
}

export async function createTables<P, C>(d: Dialect<P, C>, pool: P): Promise<void> {
  await runScript(d, pool, d.schema);
}

export async function createOutboxTable<P, C>(d: Dialect<P, C>, pool: P, table: string = OUTBOX_TABLE): Promise<void> {
  checkTable(table);
  await runScript(d, pool, d.outboxSchema.replaceAll(OUTBOX_TABLE, table));
}

/**
 * Runs a schema script. On PostgreSQL, in one transaction behind an advisory
 * lock: two `CREATE TABLE IF NOT EXISTS` of one table at once can fail there
 * (23505 on pg_type), as two instances of a service starting together do.
 */
async function runScript<P, C>(d: Dialect<P, C>, pool: P, script: string): Promise<void> {
  if (d.ddlLock === undefined) {
    for (const s of statements(script)) await d.run(pool, s);
    return;
  }
  const { conn, release } = await d.acquire(pool);
  let broken = false;
  try {
    await d.run(conn, 'BEGIN');
    try {
      await d.run(conn, d.ddlLock);
      for (const s of statements(script)) await d.run(conn, s);
      await d.run(conn, 'COMMIT');
    } catch (e) {
      await d.run(conn, 'ROLLBACK').catch(() => {
        broken = true;
      });
      throw e;
    }
  } finally {
    release(broken);
  }
}

/**
 * Inserts the `commit` marker of `(bizId, messageKey)` inside the caller's
 * open transaction on `conn`. Throws {@link AlreadyDecidedError} when a
 * marker exists (check-back answered rollback first, or an earlier
 * transaction of the key committed): then this transaction must not commit.
 */
export async function insertMarker<P, C>(d: Dialect<P, C>, conn: C, bizId: string, messageKey: string): Promise<void> {
  checkKeyArgs(bizId, messageKey);
  let inserted: Result;
  try {
    inserted = await d.run(conn, d.sql.barrierCommit, [d.key(bizId), d.key(messageKey)]);
  } catch (e) {
    if (!d.isUniqueViolation(e)) throw e;
    inserted = { rows: [], affected: 0 };
  }
  if (inserted.affected > 0) return;
  // A locking read sees the latest committed marker, not this transaction's snapshot.
  const read = await d.run(conn, d.sql.barrierLockedRead, [d.key(bizId), d.key(messageKey)]);
  throw new AlreadyDecidedError(opOf(read.rows[0]?.['op']), bizId, messageKey);
}

/**
 * Answers a check-back from the barrier: inserts a `rollback` marker unless
 * one exists (waiting on the row lock while the local transaction is open),
 * then answers whichever marker is there.
 */
export async function checkMarker<P, C>(d: Dialect<P, C>, pool: P, bizId: string, messageKey: string): Promise<'commit' | 'rollback'> {
  checkKeyArgs(bizId, messageKey);
  const { conn, release } = await d.acquire(pool);
  let broken = false;
  try {
    await d.run(conn, d.sql.barrierRollback, [d.key(bizId), d.key(messageKey)]);
    const read = await d.run(conn, d.sql.barrierRead, [d.key(bizId), d.key(messageKey)]);
    return opOf(read.rows[0]?.['op']);
  } catch (e) {
    broken = true;
    throw e;
  } finally {
    release(broken);
  }
}

export function checkKeyArgs(bizId: unknown, messageKey: unknown): void {
  if (typeof bizId !== 'string' || bizId === '') throw new ConfigError('bizId must be a non-empty string');
  if (typeof messageKey !== 'string' || messageKey === '') throw new ConfigError('messageKey must be a non-empty string');
}

async function rollbackQuietly<P, C>(d: Dialect<P, C>, conn: C): Promise<boolean> {
  try {
    await d.run(conn, 'ROLLBACK');
    return true;
  } catch {
    return false;
  }
}

/**
 * Runs `work` in a local transaction that first inserts the barrier's
 * `commit` marker. `work`'s own error is rethrown after the rollback. If
 * COMMIT fails, the barrier is read to learn whether it was applied; when
 * even that fails, {@link OutcomeUnknownError}.
 */
export async function runInTransaction<P, C, T>(d: Dialect<P, C>, pool: P, bizId: string, messageKey: string, work: (conn: C) => Promise<T>): Promise<T> {
  checkKeyArgs(bizId, messageKey);
  if (typeof work !== 'function') throw new TypeError('work must be a function: async (conn) => { … }');
  const { conn, release } = await d.acquire(pool);
  let broken = false;
  try {
    await d.run(conn, 'BEGIN');
    let value: T;
    try {
      await insertMarker(d, conn, bizId, messageKey);
      value = await work(conn);
    } catch (e) {
      broken = !(await rollbackQuietly(d, conn));
      throw e;
    }
    try {
      await d.run(conn, 'COMMIT');
    } catch (commitError) {
      broken = true;
      let decision: 'commit' | 'rollback';
      try {
        decision = await checkMarker(d, pool, bizId, messageKey);
      } catch {
        throw new OutcomeUnknownError(commitError);
      }
      if (decision === 'commit') return value;
      throw commitError;
    }
    return value;
  } finally {
    release(broken);
  }
}

/**
 * The transaction helper with the barrier: prepare through `way`, run `work`
 * in a local transaction with the `commit` marker, commit the message when
 * the transaction committed; roll it back and rethrow `work`'s own error when
 * it failed. A marker already there means an earlier run decided: the work
 * does not run, the helper sends that decision and throws
 * `AlreadyCommittedError` or `AlreadyRolledBackError` (see {@link runTransaction}).
 *
 * When `work` fails, after the local ROLLBACK and before the rollback is
 * sent, the barrier is asked as check-back asks it ({@link checkMarker}: the
 * `rollback` marker is written unless a marker is there). An identical
 * request waiting on this one's marker then finds the rollback and is
 * refused, instead of committing locally a change whose commit would be
 * refused; if that request committed first, the barrier answers commit: the
 * commit is sent and the helper throws `AlreadyCommittedError` (the order was
 * placed by the other request). If the barrier cannot be read, the rollback
 * is sent as before (check-back, answered from the barrier, agrees).
 */
export function transaction<P, C, T, R>(
  d: Dialect<P, C>,
  way: WayIn<R>,
  pool: P,
  message: Message,
  work: (conn: C, prepared: R) => Promise<T>,
  options?: TransactionOptions,
): Promise<TransactionResult<T, R>> {
  const bizId = way.bizId;
  const key = message.message_key;
  const local = async (prepared: R): Promise<T> => {
    let workFailed = false;
    try {
      return await runInTransaction(d, pool, bizId, key, async (conn) => {
        try {
          return await work(conn, prepared);
        } catch (e) {
          workFailed = true;
          throw e;
        }
      });
    } catch (error) {
      if (!workFailed) throw error;
      let decision: 'commit' | 'rollback';
      try {
        decision = await checkMarker(d, pool, bizId, key);
      } catch (e) {
        toLogger(options?.logger ?? way.logger).warn(
          { bizId, messageKey: key, error: String(e) },
          'barrier not readable after the failed work; sending the rollback',
        );
        throw error;
      }
      if (decision === 'commit') throw new AlreadyDecidedError('commit', bizId, key);
      throw error;
    }
  };
  return runTransaction(way, message, local, options);
}

/** What the inbox did with a message. */
export type Processed<T> = { status: 'done'; value: T } | { status: 'repeat' };

/** A message id, or a record whose `trustmsg-message-id` header gives it. */
export type InboxSubject = bigint | number | string | { headers?: RecordHeaders | null | undefined };

export const MAX_GROUP = 255;

export function idOf(subject: InboxSubject): bigint {
  if (typeof subject === 'bigint') return subject;
  if (typeof subject === 'number') {
    if (!Number.isSafeInteger(subject) || subject < 0) throw new ConfigError(`a message id is an unsigned integer (got ${subject})`);
    return BigInt(subject);
  }
  if (typeof subject === 'string') {
    const id = messageIdOf([['trustmsg-message-id', subject]]);
    if (id === null) throw new NoMessageIdError();
    return id;
  }
  const id = messageIdOf(subject?.headers);
  if (id === null) throw new NoMessageIdError();
  return id;
}

/**
 * Runs `work` once per `(group, message id)`: in one local transaction with
 * the inbox row, skipped for a repeat. A failed `work` rolls back with its
 * row (its error rethrown), so the next delivery runs it again.
 */
export async function processOnce<P, C, T>(
  d: Dialect<P, C>,
  pool: P,
  group: string,
  subject: InboxSubject,
  work: (conn: C) => Promise<T>,
): Promise<Processed<T>> {
  const n = typeof group === 'string' ? Buffer.byteLength(group, 'utf8') : 0;
  if (n === 0 || n > MAX_GROUP) throw new ConfigError(`a consumer group is 1 to ${MAX_GROUP} bytes (got ${n})`);
  const id = idOf(subject);
  const { conn, release } = await d.acquire(pool);
  let broken = false;
  try {
    await d.run(conn, 'BEGIN');
    let value: T;
    try {
      // Waits for a concurrent delivery's uncommitted row, then either finds
      // it (nothing inserted: a repeat) or, that delivery having rolled back, takes it.
      const inserted = await d.run(conn, d.sql.inboxInsert, [d.key(group), id.toString()]);
      if (inserted.affected === 0) {
        broken = !(await rollbackQuietly(d, conn));
        return { status: 'repeat' };
      }
      value = await work(conn);
    } catch (e) {
      broken = !(await rollbackQuietly(d, conn));
      throw e;
    }
    try {
      await d.run(conn, 'COMMIT');
    } catch (e) {
      broken = true;
      throw e;
    }
    return { status: 'done', value };
  } finally {
    release(broken);
  }
}

/**
 * Writes `message` as a row of the local message table through `conn`,
 * normally inside the caller's open transaction, so that it commits or rolls
 * back with the business change; returns the row's id.
 */
export async function enqueue<P, C>(d: Dialect<P, C>, conn: C, message: Message, table: string = OUTBOX_TABLE): Promise<bigint> {
  checkTable(table);
  const row = await outboxRowWithTrace(message);
  const [at, after] = d.dueParams(row.due);
  try {
    const done = await d.run(conn, d.sql.outboxInsert(table), [
      row.message_key,
      row.topic,
      row.record_key,
      Buffer.from(row.payload),
      row.headers,
      row.traceparent,
      at,
      after,
    ]);
    return done.insertId ?? 0n;
  } catch (e) {
    if (d.isUniqueViolation(e)) throw new DuplicateMessageError(row.message_key, e);
    throw e;
  }
}

/** Deletes barrier markers older than `ageMs`, in small batches; returns how many. */
export async function purgeBarrier<P, C>(d: Dialect<P, C>, pool: P, ageMs: number): Promise<number> {
  if (!Number.isSafeInteger(ageMs) || ageMs < 0) throw new ConfigError(`ageMs must be a whole number of milliseconds (got ${ageMs})`);
  let total = 0;
  for (;;) {
    const done = await d.run(pool, d.sql.purgeBarrier, [ageMs]);
    total += done.affected;
    if (done.affected < 1000) return total;
  }
}

/** A check-back decider answering from the barrier in `pool`. */
export function barrierDecider<P, C>(d: Dialect<P, C>, pool: P): (request: CheckRequest) => Promise<'commit' | 'rollback'> {
  return (request) => checkMarker(d, pool, request.biz_id, request.message_key);
}
