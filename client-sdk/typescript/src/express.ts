/**
 * The check-back endpoint for Express (4 and 5) and anything on Node's
 * `http` request/response (Connect, plain `http.createServer`).
 *
 * ```ts
 * import express from 'express';
 * import { checkBackExpress } from '@trustmsg/client/express';
 * import { barrierDecider } from '@trustmsg/client/mysql';
 *
 * const app = express();
 * // Before express.json(): the signature covers the raw body.
 * app.post('/trustmsg/check', checkBackExpress({ secret, decide: barrierDecider(pool) }));
 * app.use(express.json());
 * ```
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createCheckBackHandler, MAX_BODY_BYTES, type CheckBackOptions } from './checkback.js';

export { DEFAULT_CHECK_PATH } from './checkback.js';
export type { CheckBackOptions } from './checkback.js';

/** Thrown inside the body reader when the body is over the limit. */
class TooLarge extends Error {}

async function rawBody(req: IncomingMessage & { body?: unknown }): Promise<Buffer | undefined> {
  // express.raw() / express.text() (or another raw reader) ran first.
  if (Buffer.isBuffer(req.body)) return req.body;
  if (typeof req.body === 'string') return Buffer.from(req.body, 'utf8');
  // A JSON parser consumed the stream: the raw bytes are gone.
  if (req.readableEnded) return undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer | string>) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += b.length;
    if (size > MAX_BODY_BYTES) throw new TooLarge();
    chunks.push(b);
  }
  return Buffer.concat(chunks);
}

function send(res: ServerResponse, status: number, body: string): void {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.end(body);
}

/**
 * An Express/Connect handler for `POST <path>`: 401 for a call that is not
 * trustmsg's (the decider never runs), 200 with the decision otherwise.
 * Mount it before `express.json()`, or behind `express.raw({ type: '*\/*' })`.
 */
export function checkBackExpress(options: CheckBackOptions): (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void {
  const handle = createCheckBackHandler(options);
  return (req, res, next) => {
    void (async () => {
      if (req.method !== 'POST') {
        res.setHeader('allow', 'POST');
        send(res, 405, JSON.stringify({ error: { code: 'method_not_allowed', message: 'check-back is a POST' } }));
        return;
      }
      let body: Buffer | undefined;
      try {
        body = await rawBody(req);
      } catch (e) {
        if (e instanceof TooLarge) {
          send(res, 413, JSON.stringify({ error: { code: 'too_large', message: 'a check-back body is at most 64 KiB' } }));
          return;
        }
        throw e;
      }
      if (body === undefined) {
        send(
          res,
          500,
          JSON.stringify({
            error: {
              code: 'body_already_parsed',
              message: 'the raw body is gone (a JSON parser ran first): mount the check-back handler before express.json()',
            },
          }),
        );
        return;
      }
      const answer = await handle(req.headers, body);
      send(res, answer.status, answer.body);
    })().catch((e: unknown) => {
      if (next) next(e);
      else if (!res.headersSent) send(res, 500, JSON.stringify({ error: { code: 'internal', message: 'check-back failed' } }));
    });
  };
}
