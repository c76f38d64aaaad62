// OpenTelemetry context on prepare: the active span becomes the prepare's
// traceparent and tracestate (with @opentelemetry/api installed), an explicit
// trace context wins, and enqueue writes the active span's traceparent.
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { context, createTraceState, ROOT_CONTEXT, trace, TraceFlags, type Context, type ContextManager } from '@opentelemetry/api';
import { Producer } from '../../src/index.js';
import { outboxRowWithTrace } from '../../src/outbox.js';

/** The smallest context manager: what an OpenTelemetry SDK registers. */
class AlsContextManager implements ContextManager {
  readonly #als = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.#als.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.#als.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    return this;
  }
}

const headers: Array<Record<string, string | string[] | undefined>> = [];
const server = createServer((req, res) => {
  headers.push(req.headers);
  req.resume();
  req.on('end', () => {
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end('{"id":1,"biz_id":"shop","message_key":"k","status":"PREPARED"}');
  });
});
let producer: Producer;
before(async () => {
  context.setGlobalContextManager(new AlsContextManager());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  producer = new Producer({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bizId: 'shop', token: 't' });
});
after(() => {
  server.close();
  context.disable();
});

const span = trace.wrapSpanContext({
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '00f067aa0ba902b7',
  traceFlags: TraceFlags.SAMPLED,
  // The API's own helper; the SDK package (@opentelemetry/core) is not needed for this.
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  traceState: createTraceState('shop=1'),
});

test('prepare carries the active span as traceparent and tracestate', async () => {
  headers.length = 0;
  await context.with(trace.setSpan(context.active(), span), () => producer.prepare({ message_key: 'k', topic: 't', payload: '' }));
  assert.equal(headers[0]!['traceparent'], '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
  assert.equal(headers[0]!['tracestate'], 'shop=1');
  // No span, no header.
  await producer.prepare({ message_key: 'k', topic: 't', payload: '' });
  assert.equal(headers[1]!['traceparent'], undefined);
  // An explicit trace context wins.
  await context.with(trace.setSpan(context.active(), span), () =>
    producer.prepare({ message_key: 'k', topic: 't', payload: '', traceparent: '00-11111111111111111111111111111111-2222222222222222-00' }),
  );
  assert.equal(headers[2]!['traceparent'], '00-11111111111111111111111111111111-2222222222222222-00');
  assert.equal(headers[2]!['tracestate'], undefined);
});

test("enqueue writes the active span's traceparent", async () => {
  const row = await context.with(trace.setSpan(context.active(), span), () => outboxRowWithTrace({ message_key: 'k', topic: 't', payload: '' }));
  assert.equal(row.traceparent, '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
});
