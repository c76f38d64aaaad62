/**
 * What MySQL/MariaDB and PostgreSQL need besides a driver: the statements,
 * how a key is bound, the schema scripts. The `mysql2` and `pg` helpers and
 * the ORM adapters (Prisma, Drizzle, Kysely) share them, so every way in
 * writes the same barrier, inbox and outbox rows with the same SQL.
 */
import { BARRIER_INBOX_MYSQL, BARRIER_INBOX_POSTGRES, OUTBOX_MYSQL, OUTBOX_POSTGRES } from './schema.js';
import type { Dialect } from './core.js';

/** A dialect without its driver: no connections, no statement runner. */
export type Statements = Omit<Dialect<never, never>, 'acquire' | 'run' | 'isUniqueViolation'>;

function utc(d: Date): string {
  return d.toISOString().replace('T', ' ').replace('Z', '');
}

export const MYSQL: Statements = {
  name: 'mysql',
  key: (v) => Buffer.from(v, 'utf8'),
  schema: BARRIER_INBOX_MYSQL,
  outboxSchema: OUTBOX_MYSQL,
  sql: {
    barrierCommit: "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (?, ?, 'commit')",
    // The spec'd INSERT IGNORE, spelled so that only the duplicate key is ignored.
    barrierRollback: "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (?, ?, 'rollback') ON DUPLICATE KEY UPDATE op = op",
    barrierRead: 'SELECT op FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ?',
    barrierLockedRead: 'SELECT op FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ? LOCK IN SHARE MODE',
    // INSERT IGNORE, not ON DUPLICATE KEY UPDATE: mysql2 connects with CLIENT_FOUND_ROWS, under which a
    // duplicate's no-op update still counts one affected row. The values are checked first (the group's
    // length, an unsigned 64-bit id), so IGNORE has nothing else to hide.
    inboxInsert: 'INSERT IGNORE INTO trustmsg_inbox (consumer_group, message_id) VALUES (?, ?)',
    purgeBarrier: 'DELETE FROM trustmsg_barrier WHERE created_at < CURRENT_TIMESTAMP(3) - INTERVAL (? * 1000) MICROSECOND LIMIT 1000',
    outboxInsert: (table) =>
      `INSERT INTO ${table} (message_key, topic, record_key, payload, headers, traceparent, deliver_at) ` +
      'VALUES (?, ?, ?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND))',
  },
  dueParams(due) {
    if (due === null) return [null, null];
    if ('at' in due) return [utc(due.at), null];
    return [null, due.afterMs * 1000];
  },
};

export const POSTGRES: Statements = {
  name: 'postgres',
  key: (v) => v,
  schema: BARRIER_INBOX_POSTGRES,
  outboxSchema: OUTBOX_POSTGRES,
  // "trustmsg" as a bigint: the key every SDK locks while it creates its tables.
  ddlLock: 'SELECT pg_advisory_xact_lock(8390898194479674215)',
  sql: {
    barrierCommit: "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES ($1, $2, 'commit') ON CONFLICT DO NOTHING",
    barrierRollback: "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES ($1, $2, 'rollback') ON CONFLICT DO NOTHING",
    barrierRead: 'SELECT op FROM trustmsg_barrier WHERE biz_id = $1 AND message_key = $2',
    barrierLockedRead: 'SELECT op FROM trustmsg_barrier WHERE biz_id = $1 AND message_key = $2 FOR SHARE',
    inboxInsert: 'INSERT INTO trustmsg_inbox (consumer_group, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING',
    purgeBarrier:
      'DELETE FROM trustmsg_barrier WHERE ctid IN (SELECT ctid FROM trustmsg_barrier ' +
      "WHERE created_at < now() - $1::bigint * interval '1 millisecond' LIMIT 1000)",
    outboxInsert: (table) =>
      `INSERT INTO ${table} (message_key, topic, record_key, payload, headers, traceparent, deliver_at) ` +
      "VALUES ($1, $2, $3, $4, $5::jsonb, $6, COALESCE($7::timestamptz, now() + $8::bigint * interval '1 millisecond')) RETURNING id",
  },
  dueParams(due) {
    if (due === null) return [null, null];
    if ('at' in due) return [due.at.toISOString(), null];
    return [null, due.afterMs];
  },
};
