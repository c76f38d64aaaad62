/**
 * The barrier, the transaction helper, the inbox and the local message table
 * inside TypeORM's `dataSource.transaction`, on MySQL/MariaDB (`mysql2`) or
 * PostgreSQL (`pg`). Statements go through the transaction's query runner
 * with bound parameters.
 *
 * ```ts
 * import { DataSource } from 'typeorm';
 * import { forTypeorm } from '@trustmsg/client/typeorm';
 *
 * const dataSource = await new DataSource({ type: 'postgres', url, entities: [Order] }).initialize();
 * const tm = forTypeorm(dataSource);
 * await tm.transaction(producer, { message_key: 'order-42', topic: 'orders', payload }, (manager) =>
 *   manager.insert(Order, { id: 42, total: 1250 }),
 * );
 * ```
 */
import type { DataSource, EntityManager } from 'typeorm';
import { ConfigError } from './errors.js';
import { bind, type SqlDialect, type TrustmsgOrm } from './sql/orm.js';

export { isUniqueViolation, type SqlDialect, type TrustmsgOrm } from './sql/orm.js';
export type { Processed, InboxSubject } from './sql/core.js';

export interface TypeormOptions {
  /** The database behind the data source; by default from its `type` (`mysql`, `mariadb` → `'mysql'`; `postgres` → `'postgres'`). */
  dialect?: SqlDialect;
}

function dialectOf(dataSource: DataSource, given: SqlDialect | undefined): SqlDialect {
  if (given !== undefined) return given;
  const type = dataSource.options.type;
  if (type === 'mysql' || type === 'mariadb') return 'mysql';
  if (type === 'postgres') return 'postgres';
  throw new ConfigError(`TypeORM's ${JSON.stringify(type)} is not MySQL, MariaDB or PostgreSQL: give { dialect } if it speaks one of them`, {
    code: 'invalid_dialect',
  });
}

/** The rows, the affected count and the insert id of a structured query result. */
function resultOf(r: { records: unknown[]; raw: unknown; affected?: number | undefined }): {
  rows: Array<Record<string, unknown>>;
  affected: number;
  insertId?: bigint | undefined;
} {
  const raw = r.raw as { insertId?: number | string } | null | undefined;
  const insertId = raw !== null && typeof raw === 'object' && !Array.isArray(raw) && raw.insertId !== undefined ? BigInt(raw.insertId) : undefined;
  return { rows: r.records as Array<Record<string, unknown>>, affected: r.affected ?? 0, insertId };
}

/** The SDK's helpers bound to an initialized TypeORM `DataSource`; `work` gets the transaction's `EntityManager`. */
export function forTypeorm(dataSource: DataSource, options: TypeormOptions = {}): TrustmsgOrm<EntityManager> {
  return bind<DataSource, EntityManager>(dataSource, dialectOf(dataSource, options.dialect), {
    async run(on, sql, params) {
      if ('queryRunner' in on && on.queryRunner !== undefined && on.queryRunner !== null) {
        return resultOf(await on.queryRunner.query(sql, params, true));
      }
      const runner = (on as DataSource).createQueryRunner();
      try {
        return resultOf(await runner.query(sql, params, true));
      } finally {
        await runner.release();
      }
    },
    transaction: (db, work) => db.transaction(work),
  });
}
