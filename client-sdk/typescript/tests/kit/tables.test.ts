// The SDK's tables made by several instances at once: two CREATE TABLE IF
// NOT EXISTS of one table at once can fail on PostgreSQL's catalog (23505 on
// pg_type); every instance of a service that starts with createTables must
// succeed, and the tables are there once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import * as pgsdk from '../../src/postgres.js';
import { kit, rand } from '../kit.js';

test('eight instances create the tables at once on an empty PostgreSQL database', async () => {
  const name = `ts_ddl_${rand()}`;
  const admin = new pg.Client({ connectionString: kit.postgresUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(kit.postgresUrl);
  url.pathname = `/${name}`;
  try {
    const pools = Array.from({ length: 8 }, () => new pg.Pool({ connectionString: url.toString(), max: 1 }));
    // DROP DATABASE … WITH (FORCE) ends what is still connected; an idle client's error is not the test's.
    for (const p of pools) p.on('error', () => undefined);
    try {
      const results = await Promise.allSettled(
        pools.map(async (p) => {
          await pgsdk.createTables(p);
          await pgsdk.createOutboxTable(p);
        }),
      );
      assert.deepEqual(
        results.filter((r) => r.status === 'rejected'),
        [],
      );
      const rows = await pools[0]!.query<{ n: number }>(
        "SELECT COUNT(*)::int AS n FROM pg_tables WHERE schemaname = 'public' AND tablename IN ('trustmsg_barrier', 'trustmsg_inbox', 'trustmsg_outbox')",
      );
      assert.equal(rows.rows[0]?.n, 3);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
});
