/**
 * The barrier, the transaction helper, the inbox and the local message table
 * inside Kysely's `db.transaction().execute`, on PostgreSQL (`PostgresDialect`)
 * or MySQL/MariaDB (`MysqlDialect`). Statements go through
 * `executeQuery(CompiledQuery.raw(…))` with bound parameters.
 *
 * ```ts
 * import { Kysely, PostgresDialect } from 'kysely';
 * import { forKysely } from '@trustmsg/client/kysely';
 *
 * const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
 * const tm = forKysely(db, { dialect: 'postgres' });
 * await tm.transaction(producer, { message_key: 'order-42', topic: 'orders', payload }, (trx) =>
 *   trx.insertInto('orders').values({ id: 42, total: 1250 }).execute(),
 * );
 * ```
 */
import { CompiledQuery, type Kysely, type QueryResult, type Transaction } from 'kysely';
import { bind, type SqlDialect, type TrustmsgOrm } from './sql/orm.js';

export { isUniqueViolation, type SqlDialect, type TrustmsgOrm } from './sql/orm.js';
export type { Processed, InboxSubject } from './sql/core.js';

export interface KyselyOptions {
  /** The database behind `db`: `'mysql'` (MySQL, MariaDB) or `'postgres'`. */
  dialect: SqlDialect;
}

/** The SDK's helpers bound to a Kysely `db`; `work` gets Kysely's `Transaction` (`trx.insertInto(…)`). */
export function forKysely<DB>(db: Kysely<DB>, options: KyselyOptions): TrustmsgOrm<Transaction<DB>> {
  return bind<Kysely<DB>, Transaction<DB>>(db, options.dialect, {
    async run(on, sql, params) {
      const r: QueryResult<Record<string, unknown>> = await on.executeQuery(CompiledQuery.raw(sql, params));
      return { rows: [...r.rows], affected: Number(r.numAffectedRows ?? 0n), insertId: r.insertId };
    },
    transaction: (d, work) => d.transaction().execute(work),
  });
}
