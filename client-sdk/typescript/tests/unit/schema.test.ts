// The SQL the SDK ships is the contract kit's and the relay's, byte for byte.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BARRIER_INBOX_MYSQL, BARRIER_INBOX_POSTGRES, OUTBOX_MYSQL, OUTBOX_POSTGRES } from '../../src/sql/schema.js';
import { statements } from '../../src/sql/core.js';
import { CONFORMANCE_DIR, SDK_DIR } from '../vectors.js';

test("the barrier and inbox tables are the kit's sql/mysql.sql and sql/postgres.sql", () => {
  assert.equal(BARRIER_INBOX_MYSQL, readFileSync(join(CONFORMANCE_DIR, 'sql', 'mysql.sql'), 'utf8'));
  assert.equal(BARRIER_INBOX_POSTGRES, readFileSync(join(CONFORMANCE_DIR, 'sql', 'postgres.sql'), 'utf8'));
});

test('the local message table is the one trustmsg outbox schema prints', () => {
  const migrations = join(SDK_DIR, '..', 'rust', 'migrations', 'outbox');
  assert.equal(OUTBOX_MYSQL, readFileSync(join(migrations, 'mysql.sql'), 'utf8'));
  assert.equal(OUTBOX_POSTGRES, readFileSync(join(migrations, 'postgres.sql'), 'utf8'));
});

test('schema files split into their statements', () => {
  assert.equal(statements(BARRIER_INBOX_MYSQL).length, 2);
  assert.equal(statements(BARRIER_INBOX_POSTGRES).length, 4);
  assert.equal(statements(OUTBOX_POSTGRES).length, 2);
  for (const s of statements(OUTBOX_MYSQL)) assert.match(s, /^CREATE /);
});
