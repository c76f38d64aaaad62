/**
 * The barrier, the inbox and the local message table inside an ORM's own
 * transaction: what `sql/core.ts` does on a raw `mysql2`/`pg` connection
 * with BEGIN and COMMIT, done here through the ORM's client and its
 * transaction callback (Prisma's interactive `$transaction`, Drizzle's
 * `db.transaction`, Kysely's `db.transaction().execute`). The statements are
 * the same (`sql/dialects.ts`), so an ORM service and a `mysql2` one share
 * one barrier. Each adapter module gives an {@link OrmDriver}: how to run one
 * statement on the ORM's client or transaction, and how to run a callback in
 * a transaction.
 */
import { AlreadyDecidedError, ConfigError, OutcomeUnknownError } from '../errors.js';
import { runTransaction, type TransactionOptions, type TransactionResult, type WayIn } from '../transaction.js';
import type { CheckRequest, Message } from '../types.js';
import { toLogger } from '../logger.js';
import { checkTable, OUTBOX_TABLE } from '../outbox.js';
import * as core from './core.js';
import { MYSQL, POSTGRES, type Statements } from './dialects.js';

/** The database behind the ORM: MySQL ≥ 8.0 / MariaDB ≥ 10.6, or PostgreSQL ≥ 13. */
export type SqlDialect = 'mysql' | 'postgres';

/** How an adapter reaches the database through its ORM. */
export interface OrmDriver<Db, Tx> {
  /**
   * Runs one statement, its values bound as parameters (`?` on MySQL, `$1`
   * on PostgreSQL), on the ORM's client or on one of its transactions.
   * `rows` says whether the statement returns rows (SELECT, RETURNING).
   */
  run(on: Db | Tx, sql: string, params: unknown[], rows: boolean): Promise<core.Result>;
  /** Runs `work` in a transaction of `db`: committed when it resolves, rolled back (its error rethrown) when it throws. */
  transaction<T>(db: Db, work: (tx: Tx) => Promise<T>): Promise<T>;
}

/**
 * A duplicate key, however the ORM wraps the driver's error: `pg`'s 23505,
 * `mysql2`'s and `mariadb`'s ER_DUP_ENTRY (1062), Prisma's P2002 or its
 * driver adapter's `UniqueConstraintViolation`, found on the error or on its
 * `cause` chain (Drizzle's `DrizzleQueryError`).
 */
export function isUniqueViolation(e: unknown): boolean {
  let x: unknown = e;
  for (let depth = 0; depth < 8 && x !== null && typeof x === 'object'; depth++) {
    const o = x as { code?: unknown; errno?: unknown; kind?: unknown; cause?: unknown; meta?: Record<string, unknown> };
    if (o.code === '23505' || o.code === 'ER_DUP_ENTRY' || o.errno === 1062 || o.code === 'P2002' || o.kind === 'UniqueConstraintViolation') return true;
    const meta = o.meta;
    if (meta && (meta['code'] === '23505' || meta['code'] === '1062' || meta['code'] === 1062)) return true;
    x = o.cause ?? meta?.['driverAdapterError'];
  }
  return false;
}

const RETURNS_ROWS = /^\s*SELECT\b|\bRETURNING\b/i;

/** The statements' dialect with the ORM's runner, as `sql/core.ts` takes it (no raw connections). */
export function dialectOf<Db, Tx>(name: SqlDialect, o: OrmDriver<Db, Tx>): core.Dialect<Db, Tx> {
  if (name !== 'mysql' && name !== 'postgres') {
    throw new ConfigError(`dialect must be 'mysql' or 'postgres' (got ${JSON.stringify(name)})`, { code: 'invalid_dialect' });
  }
  const statements: Statements = name === 'mysql' ? MYSQL : POSTGRES;
  return {
    ...statements,
    acquire() {
      return Promise.reject(new Error('an ORM adapter has no raw connections'));
    },
    async run(on, sql, params = []) {
      const result = await o.run(on, sql, params, RETURNS_ROWS.test(sql));
      if (result.insertId !== undefined) return result;
      const id = result.rows[0]?.['id'];
      return { ...result, insertId: typeof id === 'string' || typeof id === 'number' || typeof id === 'bigint' ? BigInt(id) : undefined };
    },
    isUniqueViolation,
  };
}

/** The barrier, the transaction helper, the inbox and the local message table bound to one ORM client. */
export interface TrustmsgOrm<Tx> {
  /** `'mysql'` or `'postgres'`, as given. */
  readonly dialect: SqlDialect;
  /** Creates the barrier and inbox tables if they do not exist (the contract kit's `sql/*.sql`). */
  createTables(): Promise<void>;
  /** Creates the local message table (`trustmsg outbox schema`). On MySQL, DDL commits an open transaction: call it at start-up. */
  createOutboxTable(table?: string): Promise<void>;
  /**
   * Prepare → `work` inside the ORM's transaction, which first inserts the
   * barrier's `commit` marker → commit; on failure, rollback and `work`'s own
   * error rethrown. The same contract as `transaction` of
   * `@trustmsg/client/mysql` (see there); `work` gets the ORM's transaction.
   */
  transaction<T, R>(way: WayIn<R>, message: Message, work: (tx: Tx, prepared: R) => Promise<T>, options?: TransactionOptions): Promise<TransactionResult<T, R>>;
  /** Runs `work` in the ORM's transaction after inserting the `commit` marker; rethrows `work`'s own error after the rollback. */
  runInTransaction<T>(bizId: string, messageKey: string, work: (tx: Tx) => Promise<T>): Promise<T>;
  /** Inserts the `commit` marker in your open ORM transaction `tx`; {@link AlreadyDecidedError} when a marker exists. */
  insertMarker(tx: Tx, bizId: string, messageKey: string): Promise<void>;
  /** The barrier's answer to a check-back of `(bizId, messageKey)`; waits while its local transaction is open. */
  checkMarker(bizId: string, messageKey: string): Promise<'commit' | 'rollback'>;
  /** A check-back decider answering from the barrier: `checkBackExpress({ secret, decide: tm.barrierDecider() })`. */
  barrierDecider(): (request: CheckRequest) => Promise<'commit' | 'rollback'>;
  /** Runs `work` once per `(group, message id)`, in one ORM transaction with the inbox row. */
  processOnce<T>(group: string, subject: core.InboxSubject, work: (tx: Tx) => Promise<T>): Promise<core.Processed<T>>;
  /** Writes `message` to the local message table in your open ORM transaction `tx`; returns the row's id. */
  enqueue(tx: Tx, message: Message, options?: { table?: string }): Promise<bigint>;
  /** Deletes barrier markers older than `ageMs`. */
  purgeBarrier(ageMs: number): Promise<number>;
}

/** Thrown inside the inbox's transaction to roll back a repeat; never seen outside. */
class Repeat extends Error {}

/** The {@link TrustmsgOrm} of `db` through `o`. */
export function bind<Db, Tx>(db: Db, name: SqlDialect, o: OrmDriver<Db, Tx>): TrustmsgOrm<Tx> {
  const d = dialectOf(name, o);

  const checkMarker = async (bizId: string, messageKey: string): Promise<'commit' | 'rollback'> => {
    core.checkKeyArgs(bizId, messageKey);
    // Autocommit, as check-back runs it: the insert waits on an open transaction's marker.
    await d.run(db, d.sql.barrierRollback, [d.key(bizId), d.key(messageKey)]);
    const read = await d.run(db, d.sql.barrierRead, [d.key(bizId), d.key(messageKey)]);
    return core.opOf(read.rows[0]?.['op']);
  };

  const runInTransaction = async <T>(bizId: string, messageKey: string, work: (tx: Tx) => Promise<T>): Promise<T> => {
    core.checkKeyArgs(bizId, messageKey);
    if (typeof work !== 'function') throw new TypeError('work must be a function: async (tx) => { … }');
    let done: { value: T } | undefined;
    try {
      return await o.transaction(db, async (tx) => {
        await core.insertMarker(d, tx, bizId, messageKey);
        const value = await work(tx);
        done = { value };
        return value;
      });
    } catch (e) {
      if (done === undefined) throw e;
      // The work resolved but the transaction did not commit as far as we know (COMMIT failed,
      // or the ORM gave the transaction up): the barrier's marker tells what happened.
      let decision: 'commit' | 'rollback';
      try {
        decision = await checkMarker(bizId, messageKey);
      } catch {
        throw new OutcomeUnknownError(e);
      }
      if (decision === 'commit') return done.value;
      throw e;
    }
  };

  const runScript = async (script: string): Promise<void> => {
    if (d.ddlLock === undefined) {
      for (const s of core.statements(script)) await o.run(db, s, [], false);
      return;
    }
    const lock = d.ddlLock;
    await o.transaction(db, async (tx) => {
      await o.run(tx, lock, [], false);
      for (const s of core.statements(script)) await o.run(tx, s, [], false);
    });
  };

  return {
    dialect: name,
    createTables: () => runScript(d.schema),
    async createOutboxTable(table = OUTBOX_TABLE) {
      checkTable(table);
      await runScript(d.outboxSchema.replaceAll(OUTBOX_TABLE, table));
    },
    transaction<T, R>(way: WayIn<R>, message: Message, work: (tx: Tx, prepared: R) => Promise<T>, options?: TransactionOptions) {
      const bizId = way.bizId;
      const key = message.message_key;
      const local = async (prepared: R): Promise<T> => {
        let workFailed = false;
        try {
          return await runInTransaction(bizId, key, async (tx) => {
            try {
              return await work(tx, prepared);
            } catch (e) {
              workFailed = true;
              throw e;
            }
          });
        } catch (error) {
          if (!workFailed) throw error;
          // As check-back would: the rollback marker, unless an identical request committed first.
          let decision: 'commit' | 'rollback';
          try {
            decision = await checkMarker(bizId, key);
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
    },
    runInTransaction,
    insertMarker: (tx, bizId, messageKey) => core.insertMarker(d, tx, bizId, messageKey),
    checkMarker,
    barrierDecider: () => (request) => checkMarker(request.biz_id, request.message_key),
    async processOnce<T>(group: string, subject: core.InboxSubject, work: (tx: Tx) => Promise<T>): Promise<core.Processed<T>> {
      const n = typeof group === 'string' ? Buffer.byteLength(group, 'utf8') : 0;
      if (n === 0 || n > core.MAX_GROUP) throw new ConfigError(`a consumer group is 1 to ${core.MAX_GROUP} bytes (got ${n})`);
      const id = core.idOf(subject);
      try {
        const value = await o.transaction(db, async (tx) => {
          // Waits for a concurrent delivery's uncommitted row, then finds it (a repeat) or takes it.
          const inserted = await d.run(tx, d.sql.inboxInsert, [d.key(group), id.toString()]);
          if (inserted.affected === 0) throw new Repeat();
          return work(tx);
        });
        return { status: 'done', value };
      } catch (e) {
        if (e instanceof Repeat) return { status: 'repeat' };
        throw e;
      }
    },
    async enqueue(tx, message, options = {}) {
      const id = await core.enqueue(d, tx, message, options.table);
      if (id !== 0n || name !== 'mysql') return id;
      // Prisma's raw execute gives no insert id: the connection's last one, in the same transaction.
      const read = await d.run(tx, 'SELECT LAST_INSERT_ID() AS id', []);
      return read.insertId ?? 0n;
    },
    purgeBarrier: (ageMs) => core.purgeBarrier(d, db, ageMs),
  };
}
