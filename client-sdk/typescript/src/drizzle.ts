/**
 * The barrier, the transaction helper, the inbox and the local message table
 * inside Drizzle's `db.transaction`, on PostgreSQL (`drizzle-orm/node-postgres`,
 * `drizzle-orm/postgres-js`) or MySQL/MariaDB (`drizzle-orm/mysql2`).
 * Statements go through `tx.execute(sql…)` with every value a bound parameter.
 *
 * ```ts
 * import { drizzle } from 'drizzle-orm/node-postgres';
 * import { forDrizzle } from '@trustmsg/client/drizzle';
 *
 * const db = drizzle(pool);
 * const tm = forDrizzle(db, { dialect: 'postgres' });
 * await tm.transaction(producer, { message_key: 'order-42', topic: 'orders', payload }, (tx) =>
 *   tx.insert(orders).values({ id: 42, total: 1250 }),
 * );
 * ```
 */
import { sql, type SQL } from 'drizzle-orm';
import { bind, type SqlDialect, type TrustmsgOrm } from './sql/orm.js';

export { isUniqueViolation, type SqlDialect, type TrustmsgOrm } from './sql/orm.js';
export type { Processed, InboxSubject } from './sql/core.js';

/** What the adapter uses of a Drizzle database or transaction. */
export interface DrizzleExecute {
  execute(query: SQL): PromiseLike<unknown>;
}

/** A Drizzle database: `execute` and `transaction`. */
export interface DrizzleDatabaseLike<Tx extends DrizzleExecute> extends DrizzleExecute {
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
}

/** The transaction Drizzle passes to `db.transaction`'s callback. */
export type DrizzleTx<Db> = Db extends { transaction(fn: (tx: infer Tx) => Promise<never>, ...rest: never[]): unknown } ? Tx : never;

export interface DrizzleOptions {
  /** The database behind `db`: `'mysql'` (MySQL, MariaDB) or `'postgres'`. */
  dialect: SqlDialect;
}

/** `text` with its `?` or `$n` placeholders as Drizzle's bound parameters. */
export function toDrizzleSql(dialect: SqlDialect, text: string, params: unknown[]): SQL {
  const chunks: SQL[] = [];
  const placeholder = dialect === 'mysql' ? /\?/g : /\$(\d+)/g;
  let last = 0;
  let next = 0;
  for (const m of text.matchAll(placeholder)) {
    chunks.push(sql.raw(text.slice(last, m.index)));
    const i = m[1] === undefined ? next++ : Number(m[1]) - 1;
    chunks.push(sql`${sql.param(params[i])}`);
    last = m.index + m[0].length;
  }
  chunks.push(sql.raw(text.slice(last)));
  return sql.join(chunks);
}

/** The rows and the affected count, whichever driver Drizzle runs on. */
function resultOf(dialect: SqlDialect, raw: unknown): { rows: Array<Record<string, unknown>>; affected: number; insertId?: bigint | undefined } {
  if (dialect === 'mysql') {
    // mysql2: [rows, fields] for a SELECT, [ResultSetHeader, undefined] otherwise.
    const first: unknown = Array.isArray(raw) ? raw[0] : raw;
    if (Array.isArray(first)) return { rows: first as Array<Record<string, unknown>>, affected: 0 };
    const header = first as { affectedRows?: number; insertId?: number | string };
    return { rows: [], affected: header.affectedRows ?? 0, insertId: header.insertId === undefined ? undefined : BigInt(header.insertId) };
  }
  // postgres-js: an array of rows with `count`; node-postgres: { rows, rowCount }.
  if (Array.isArray(raw)) return { rows: raw as Array<Record<string, unknown>>, affected: (raw as { count?: number }).count ?? raw.length };
  const r = raw as { rows?: Array<Record<string, unknown>>; rowCount?: number | null };
  return { rows: r.rows ?? [], affected: r.rowCount ?? 0 };
}

/** The SDK's helpers bound to a Drizzle `db`; `work` gets Drizzle's transaction (`tx.insert(…)`). */
export function forDrizzle<Db extends DrizzleDatabaseLike<DrizzleTx<Db> & DrizzleExecute>>(db: Db, options: DrizzleOptions): TrustmsgOrm<DrizzleTx<Db>> {
  const dialect = options.dialect;
  return bind<Db, DrizzleTx<Db>>(db, dialect, {
    async run(on, text, params) {
      return resultOf(dialect, await (on as DrizzleExecute).execute(toDrizzleSql(dialect, text, params)));
    },
    transaction: (d, work) => d.transaction(work),
  });
}
