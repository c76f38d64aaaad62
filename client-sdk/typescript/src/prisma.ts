/**
 * The barrier, the transaction helper, the inbox and the local message table
 * inside Prisma's interactive `$transaction`, on MySQL/MariaDB or PostgreSQL.
 * Works with any Prisma Client ≥ 5 (the Rust engine or, as tested, Prisma 7's
 * client engine with a driver adapter: `@prisma/adapter-pg`,
 * `@prisma/adapter-mariadb`). Statements go through `$executeRawUnsafe` /
 * `$queryRawUnsafe` with bound parameters.
 *
 * ```ts
 * import { PrismaClient } from './generated/prisma/client.js';
 * import { PrismaPg } from '@prisma/adapter-pg';
 * import { forPrisma } from '@trustmsg/client/prisma';
 *
 * const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString }) });
 * const tm = forPrisma(prisma, { dialect: 'postgres' });
 * await tm.createTables();
 * const result = await tm.transaction(producer, { message_key: 'order-42', topic: 'orders', payload }, (tx) =>
 *   tx.order.create({ data: { id: 42, total: 1250 } }),
 * );
 * ```
 */
import { bind, type SqlDialect, type TrustmsgOrm } from './sql/orm.js';

export { isUniqueViolation, type SqlDialect, type TrustmsgOrm } from './sql/orm.js';
export type { Processed, InboxSubject } from './sql/core.js';

/** What the adapter uses of a Prisma Client (and of its interactive transaction client). */
export interface PrismaRaw {
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>;
}

/** A Prisma Client: raw statements and the interactive `$transaction`. */
export interface PrismaClientLike<Tx extends PrismaRaw> extends PrismaRaw {
  $transaction<T>(fn: (tx: Tx) => Promise<T>, options?: PrismaTransactionOptions): Promise<T>;
}

/** Prisma's interactive transaction options (`maxWait`, `timeout`, `isolationLevel`), passed as they are. */
export interface PrismaTransactionOptions {
  maxWait?: number;
  timeout?: number;
  isolationLevel?: string;
}

/** The transaction client Prisma passes to `$transaction`'s callback. */
export type PrismaTx<Db> = Db extends { $transaction(fn: (tx: infer Tx) => Promise<never>, ...rest: never[]): unknown } ? Tx : never;

export interface PrismaOptions {
  /** The database behind the client: `'mysql'` (MySQL, MariaDB) or `'postgres'`. */
  dialect: SqlDialect;
  /**
   * Options of every `$transaction` the adapter opens. Prisma's default
   * timeout is 5 s: raise `timeout` if your work can take longer.
   */
  transactionOptions?: PrismaTransactionOptions;
}

/** The SDK's helpers bound to `prisma`; `work` gets Prisma's transaction client (`tx.order.create(…)`). */
export function forPrisma<Db extends PrismaClientLike<PrismaTx<Db> & PrismaRaw>>(prisma: Db, options: PrismaOptions): TrustmsgOrm<PrismaTx<Db>> {
  type Tx = PrismaTx<Db>;
  const txOptions = options.transactionOptions;
  return bind<Db, Tx>(prisma, options.dialect, {
    async run(on, sql, params, rows) {
      const client = on as PrismaRaw;
      if (rows) {
        const result = (await client.$queryRawUnsafe(sql, ...params)) as Array<Record<string, unknown>>;
        return { rows: result, affected: result.length };
      }
      return { rows: [], affected: await client.$executeRawUnsafe(sql, ...params) };
    },
    transaction: (db, work) => (txOptions === undefined ? db.$transaction(work) : db.$transaction(work, txOptions)),
  });
}
