// The logger options: pino's order (a real pino logger, given as it is), the
// default single JSON line, and the deprecated message-first form, each seen
// through a real retry warning of the Producer against a local HTTP server.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { Producer, structuredLogger, type AnyLogger } from '../../src/index.js';
import { toLogger } from '../../src/logger.js';

// Answers 503 to the first call of each key, then the view: one retry warning per prepare.
const failed = new Set<string>();
const server = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    const key = (JSON.parse(body) as { message_key: string }).message_key;
    if (!failed.has(key)) {
      failed.add(key);
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":{"code":"unavailable","message":"try again"}}');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      `{"id":7,"biz_id":"shop","message_key":${JSON.stringify(key)},"status":"PREPARED","send_status":null,"topic":"orders","key":null,"payload_size":2,"verify_attempts":0,"send_attempts":0,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`,
    );
  });
});
let base = '';
before(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => server.close());

async function retriedPrepare(logger: AnyLogger | undefined, key: string): Promise<void> {
  const p = new Producer({ baseURL: base, bizId: 'shop', token: 't', maxRetries: 1, minRetryDelayMs: 1, logger });
  await p.prepare({ message_key: key, topic: 'orders', payload: '{}' });
}

test('a pino logger is given as it is: one JSON line with the fields and the message', async () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  const log = pino({ base: { app: 'orders' } }, sink);
  await retriedPrepare(log.child({ component: 'trustmsg' }), 'pino-1');
  assert.equal(lines.length, 1, lines.join('\n'));
  const line = JSON.parse(lines[0]!) as Record<string, unknown>;
  assert.equal(line['level'], 40);
  assert.equal(line['msg'], 'trustmsg call failed; retrying');
  assert.equal(line['component'], 'trustmsg');
  assert.equal(line['app'], 'orders');
  assert.equal(line['method'], 'POST');
  assert.equal(line['attempt'], 1);
  assert.match(String(line['url']), /\/v1\/messages\/prepare$/);
});

test('the deprecated message-first logger is still called (message, fields)', async () => {
  const calls: unknown[][] = [];
  const old = {
    warn: (...args: unknown[]) => calls.push(['warn', ...args]),
    error: (...args: unknown[]) => calls.push(['error', ...args]),
  };
  await retriedPrepare(old, 'old-1');
  assert.equal(calls.length, 1);
  assert.equal(calls[0]![0], 'warn');
  assert.equal(calls[0]![1], 'trustmsg call failed; retrying');
  assert.equal((calls[0]![2] as Record<string, unknown>)['attempt'], 1);
});

test('a fields-first logger of ones own is marked with structuredLogger', async () => {
  const calls: unknown[][] = [];
  const mine = structuredLogger({
    warn: (fields: Record<string, unknown>, message: string) => calls.push([fields, message]),
    error: (fields: Record<string, unknown>, message: string) => calls.push([fields, message]),
  });
  await retriedPrepare(mine, 'mine-1');
  assert.equal(calls.length, 1);
  assert.equal((calls[0]![0] as Record<string, unknown>)['attempt'], 1);
  assert.equal(calls[0]![1], 'trustmsg call failed; retrying');
});

test('without a logger, and with console, each event is one JSON line in pino shape', () => {
  const written: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  const warn = console.warn;
  process.stderr.write = (chunk: string) => {
    written.push(chunk);
    return true;
  };
  console.warn = (line: string) => written.push(`${line}\n`);
  try {
    toLogger(undefined).warn({ bizId: 'shop', id: 18446744073709551615n, nested: { a: [1, 2] } }, 'rollback not delivered');
    toLogger(console).warn({ bizId: 'shop' }, 'via console');
  } finally {
    process.stderr.write = write;
    console.warn = warn;
  }
  assert.equal(written.length, 2);
  for (const w of written) assert.ok(w.endsWith('\n') && !w.slice(0, -1).includes('\n'), `one line: ${JSON.stringify(w)}`);
  const first = JSON.parse(written[0]!) as Record<string, unknown>;
  assert.equal(first['level'], 40);
  assert.equal(first['name'], 'trustmsg');
  assert.equal(first['msg'], 'rollback not delivered');
  assert.equal(first['id'], '18446744073709551615');
  assert.deepEqual(first['nested'], { a: [1, 2] });
  assert.equal((JSON.parse(written[1]!) as Record<string, unknown>)['msg'], 'via console');
});
