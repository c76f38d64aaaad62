// The HTTP client against a real local HTTP server standing in for trustmsg's API.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import {
  AlreadyCommittedError,
  AlreadyRolledBackError,
  AuthenticationError,
  backoffDelay,
  BadRequestError,
  ConfigError,
  CommitRejectedError,
  ConflictError,
  NotFoundError,
  NotPreparedError,
  parseJson,
  Producer,
  RollbackRejectedError,
  UnavailableError,
  UserAbortError,
} from '../../src/index.js';

const quiet = { warn: () => undefined, error: () => undefined };
const view = (id: string, status = 'PREPARED'): string =>
  `{"id":${id},"biz_id":"shop","message_key":"k","status":"${status}","send_status":null,"topic":"orders","key":null,"payload_size":2,"verify_attempts":0,"send_attempts":0,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`;

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;
let handler: Handler = (_req, _body, res) => res.end();
const seen: Array<{ method: string; url: string; body: string; at: number; headers: IncomingMessage['headers'] }> = [];
const server = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', body, at: performance.now(), headers: req.headers });
    handler(req, body, res);
  });
});
let base = '';
before(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/prefix`;
});
after(() => server.close());

function reply(status: number, body: string, headers: Record<string, string> = {}): Handler {
  return (_req, _body, res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(body);
  };
}

const producer = (extra: Partial<ConstructorParameters<typeof Producer>[0]> = {}): Producer =>
  new Producer({ baseURL: base, bizId: 'shop', token: 'tok', logger: quiet, ...extra });

test('prepare sends the API request with the bearer token and returns the view with a 64-bit id', async () => {
  seen.length = 0;
  handler = reply(200, view('18446744073709551615'));
  const v = await producer().prepare({
    message_key: 'order 42/x',
    topic: 'orders',
    payload: new Uint8Array([0, 1, 255]),
    key: 'c-7',
    headers: { a: '1' },
    deliver_after_ms: 5,
    traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  });
  assert.equal(v.id, 18446744073709551615n);
  assert.equal(seen.length, 1);
  const s = seen[0]!;
  assert.equal(s.url, '/prefix/v1/messages/prepare');
  assert.equal(s.headers['authorization'], 'Bearer tok');
  assert.equal(s.headers['traceparent'], '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
  assert.deepEqual(JSON.parse(s.body), {
    biz_id: 'shop',
    message_key: 'order 42/x',
    topic: 'orders',
    payload: 'AAH/',
    payload_encoding: 'base64',
    key: 'c-7',
    headers: { a: '1' },
    deliver_after_ms: 5,
  });
  // get percent-encodes the key as one path segment
  handler = reply(200, view('7', 'COMMITTED'));
  assert.equal((await producer().get('order 42/x')).status, 'COMMITTED');
  assert.equal(seen.at(-1)!.url, '/prefix/v1/messages/shop/order%2042%2Fx');
});

test('a 503 is retried with growing gaps; a 409 and a 400 are not retried', async () => {
  seen.length = 0;
  let n = 0;
  handler = (req, body, res) => {
    n++;
    (n <= 2 ? reply(503, '{"error":{"code":"store_unavailable","message":"down"}}') : reply(200, view('5', 'COMMITTED')))(req, body, res);
  };
  const v = await producer({ minRetryDelayMs: 50 }).commit('k');
  assert.equal(v.status, 'COMMITTED');
  assert.equal(seen.length, 3);
  const gap1 = seen[1]!.at - seen[0]!.at;
  const gap2 = seen[2]!.at - seen[1]!.at;
  // Each wait at least its floor (50 ms, then 100: above the first's 75 ms
  // ceiling), not gap2 > gap1: on a loaded machine a late first timer made
  // the first gap longer than the second.
  assert.ok(gap1 >= 45 && gap2 >= 95, `gaps ${gap1} then ${gap2}`);

  for (const [status, cls, code] of [
    [409, ConflictError, 'prepare_conflict'],
    [409, AlreadyRolledBackError, 'already_rolled_back'],
    [409, AlreadyRolledBackError, 'rolled_back'],
    [400, BadRequestError, 'invalid_topic'],
    [404, NotFoundError, 'message_not_found'],
    [401, AuthenticationError, 'unauthorized'],
  ] as const) {
    seen.length = 0;
    handler = reply(status, `{"error":{"code":"${code}","message":"no"}}`);
    await assert.rejects(producer().commit('k'), (e: unknown) => e instanceof cls && e.status === status && e.code === code);
    assert.equal(seen.length, 1, `${status} is final`);
  }
});

test('retries are bounded: UnavailableError with the attempts, the last status and code', async () => {
  seen.length = 0;
  handler = reply(503, '{"error":{"code":"store_unavailable","message":"down"}}');
  await assert.rejects(
    producer({ maxRetries: 2, minRetryDelayMs: 1 }).rollback('k'),
    (e: unknown) => e instanceof UnavailableError && e.attempts === 3 && e.status === 503 && e.code === 'store_unavailable',
  );
  assert.equal(seen.length, 3);
});

test('Retry-After is honoured', async () => {
  seen.length = 0;
  let n = 0;
  handler = (req, body, res) => {
    n++;
    (n === 1 ? reply(503, '{"error":{"code":"x","message":"y"}}', { 'retry-after': '1' }) : reply(200, view('1')))(req, body, res);
  };
  await producer({ minRetryDelayMs: 1 }).commit('k');
  assert.ok(seen[1]!.at - seen[0]!.at >= 950);
});

test('a refused connection is retried, then UnavailableError', async () => {
  const dead = createServer();
  await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
  const port = (dead.address() as AddressInfo).port;
  await new Promise<void>((r) => dead.close(() => r()));
  const p = new Producer({ baseURL: `http://127.0.0.1:${port}`, bizId: 'shop', token: 't', maxRetries: 1, minRetryDelayMs: 1, logger: quiet });
  await assert.rejects(p.commit('k'), (e: unknown) => e instanceof UnavailableError && e.attempts === 2 && /ECONNREFUSED/.test(e.message));
});

test('an AbortSignal gives the call up, during a request and during the backoff', async () => {
  handler = () => undefined; // never answers
  await assert.rejects(producer().commit('k', { signal: AbortSignal.timeout(100) }), UserAbortError);
  handler = reply(503, '{"error":{"code":"x","message":"y"}}');
  const started = performance.now();
  await assert.rejects(producer({ minRetryDelayMs: 5000 }).commit('k', { signal: AbortSignal.timeout(200) }), UserAbortError);
  assert.ok(performance.now() - started < 2000);
  const aborted = new AbortController();
  aborted.abort();
  seen.length = 0;
  await assert.rejects(producer().commit('k', { signal: aborted.signal }), UserAbortError);
  assert.equal(seen.length, 0);
  handler = reply(200, '{}');
});

test('a request that takes too long is a timeout, retried', async () => {
  seen.length = 0;
  handler = () => undefined;
  await assert.rejects(
    producer({ timeoutMs: 100, maxRetries: 1, minRetryDelayMs: 1 }).commit('k'),
    (e: unknown) => e instanceof UnavailableError && e.attempts === 2 && /within 100 ms/.test(e.message),
  );
});

test('settings a person can fix are refused with what to do', () => {
  assert.throws(() => new Producer({ baseURL: 'not a url', bizId: 'shop', token: 't' }), ConfigError);
  assert.throws(() => new Producer({ baseURL: 'ftp://x', bizId: 'shop', token: 't' }), ConfigError);
  assert.throws(() => new Producer({ baseURL: 'http://x', bizId: 'a b', token: 't' }), /bizId/);
  assert.throws(() => new Producer({ baseURL: 'http://x', bizId: 'shop', token: '' }), /token/);
  assert.throws(() => new Producer({ baseURL: 'http://x', bizId: 'shop', token: 't', maxRetries: -1 }), /maxRetries/);
});

test('backoff doubles with up to +50 % jitter, capped', () => {
  assert.equal(
    backoffDelay(1, 100, 5000, () => 0),
    100,
  );
  assert.equal(
    backoffDelay(1, 100, 5000, () => 0.999),
    150,
  );
  assert.equal(
    backoffDelay(3, 100, 5000, () => 0),
    400,
  );
  assert.equal(
    backoffDelay(10, 100, 5000, () => 0.5),
    5000,
  );
});

test('parseJson keeps integers beyond 2^53 and agrees with JSON.parse elsewhere', () => {
  assert.deepEqual(parseJson('{"a":[1,2.5,-3e2,true,null,"x\\"y\\u00e9"],"id":9007199254740993}'), {
    a: [1, 2.5, -300, true, null, 'x"yé'],
    id: 9007199254740993n,
  });
  assert.throws(() => parseJson('{"a":1,}'), SyntaxError);
  assert.throws(() => parseJson('[1] x'), SyntaxError);
  assert.equal((parseJson('{"__proto__":{"x":1}}') as Record<string, unknown>)['x'], undefined);
});

/** Answers each path as `answers` says (a status and a body), recording the paths asked. */
function byPath(answers: Record<string, [number, string]>): Handler {
  return (req, body, res) => {
    const path = (req.url ?? '').replace('/prefix', '');
    const [status, text] = answers[path] ?? [500, '{"error":{"code":"internal","message":"not expected"}}'];
    reply(status, text)(req, body, res);
  };
}
const paths = (): string[] => seen.map((s) => s.url.replace('/prefix', ''));
const message = { message_key: 'k', topic: 'orders', payload: '{}' };

test('the helper runs no local work unless prepare answered PREPARED', async () => {
  const cases = [
    ['COMMITTED', (e: unknown) => e instanceof AlreadyCommittedError && e.view?.status === 'COMMITTED' && e.view.id === 7n],
    // An older trustmsg answers a prepare of a rolled-back message 200 ROLLED_BACK.
    ['ROLLED_BACK', (e: unknown) => e instanceof AlreadyRolledBackError && e instanceof ConflictError && e.code === 'already_rolled_back'],
    ['VERIFY_FAILED', (e: unknown) => e instanceof NotPreparedError && e.messageStatus === 'VERIFY_FAILED'],
    ['SOMETHING_NEW', (e: unknown) => e instanceof NotPreparedError && e.messageStatus === 'SOMETHING_NEW'],
  ] as const;
  for (const [status, expected] of cases) {
    seen.length = 0;
    handler = byPath({ '/v1/messages/prepare': [200, view('7', status)], '/v1/messages/rollback': [200, view('7', 'ROLLED_BACK')] });
    let entered = false;
    await assert.rejects(
      producer().transaction(message, async () => {
        entered = true;
      }),
      expected,
      status,
    );
    assert.equal(entered, false, `${status}: the local work never ran`);
    // A rolled-back message's rollback is repeated (harmless); nothing else is decided.
    assert.deepEqual(paths(), status === 'ROLLED_BACK' ? ['/v1/messages/prepare', '/v1/messages/rollback'] : ['/v1/messages/prepare'], status);
  }
  seen.length = 0;
  handler = byPath({
    '/v1/messages/prepare': [409, '{"error":{"code":"already_rolled_back","message":"rolled back"}}'],
    '/v1/messages/rollback': [200, view('7', 'ROLLED_BACK')],
  });
  await assert.rejects(
    producer().transaction(message, async () => assert.fail('the local work ran')),
    (e: unknown) => e instanceof AlreadyRolledBackError && e.status === 409,
  );
  assert.deepEqual(paths(), ['/v1/messages/prepare', '/v1/messages/rollback']);
});

test('a commit trustmsg refuses after the local commit is an error carrying the value; a refused rollback carries the work error', async () => {
  handler = byPath({
    '/v1/messages/prepare': [201, view('8')],
    '/v1/messages/commit': [409, '{"error":{"code":"already_rolled_back","message":"an operator rolled it back"}}'],
    '/v1/messages/rollback': [409, '{"error":{"code":"already_committed","message":"an operator committed it"}}'],
  });
  await assert.rejects(
    producer().transaction(message, async () => 'order 8'),
    (e: unknown) =>
      e instanceof CommitRejectedError &&
      e.value === 'order 8' &&
      e.cause instanceof AlreadyRolledBackError &&
      e.code === 'already_rolled_back' &&
      e.status === 409,
  );
  const declined = new Error('payment declined');
  await assert.rejects(
    producer().transaction(message, async () => {
      throw declined;
    }),
    (e: unknown) => e instanceof RollbackRejectedError && e.workError === declined && e.cause instanceof ConflictError && e.code === 'already_committed',
  );
});

test('afterLocalCommit runs after the local work and, when it throws, no decision is sent', async () => {
  seen.length = 0;
  handler = byPath({ '/v1/messages/prepare': [201, view('9')], '/v1/messages/commit': [200, view('9', 'COMMITTED')] });
  const order: string[] = [];
  const stop = new Error('the process stops here');
  await assert.rejects(
    producer().transaction(message, async () => order.push('local'), {
      afterLocalCommit: () => {
        order.push('hook');
        throw stop;
      },
    }),
    (e: unknown) => e === stop,
  );
  assert.deepEqual(order, ['local', 'hook']);
  assert.deepEqual(paths(), ['/v1/messages/prepare']);
  seen.length = 0;
  const done = await producer().transaction(message, async () => 'v', { afterLocalCommit: async () => undefined });
  assert.ok(done.status === 'committed' && done.receipt.status === 'COMMITTED' && done.prepared.id === 9n);
  assert.deepEqual(paths(), ['/v1/messages/prepare', '/v1/messages/commit']);
});
