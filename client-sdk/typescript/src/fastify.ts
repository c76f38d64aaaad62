/**
 * The check-back endpoint as a Fastify plugin. It reads the raw body with its
 * own content-type parser, inside its own encapsulated context, so the
 * application's JSON parsing elsewhere is untouched.
 *
 * ```ts
 * import Fastify from 'fastify';
 * import { checkBackFastify } from '@trustmsg/client/fastify';
 * import { barrierDecider } from '@trustmsg/client/postgres';
 *
 * const app = Fastify();
 * await app.register(checkBackFastify({ secret, decide: barrierDecider(pool) }));
 * // serves POST /trustmsg/check
 * ```
 */
import type { FastifyPluginAsync } from 'fastify';
import { createCheckBackHandler, DEFAULT_CHECK_PATH, MAX_BODY_BYTES, type CheckBackOptions } from './checkback.js';

export { DEFAULT_CHECK_PATH } from './checkback.js';
export type { CheckBackOptions } from './checkback.js';

/** The plugin's settings: the handler's, and where to serve. */
export interface FastifyCheckBackOptions extends CheckBackOptions {
  /** Default `/trustmsg/check`. */
  path?: string;
}

/** A Fastify plugin serving `POST <path>` (register it without `fastify-plugin`: its body parser stays its own). */
export function checkBackFastify(options: FastifyCheckBackOptions): FastifyPluginAsync {
  const handle = createCheckBackHandler(options);
  const path = options.path ?? DEFAULT_CHECK_PATH;
  // eslint-disable-next-line @typescript-eslint/require-await -- Fastify's plugin contract is a function returning a promise
  return async (app) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_BODY_BYTES }, (_req, body, done) => {
      done(null, body);
    });
    app.post(path, async (req, reply) => {
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const answer = await handle(req.headers, body);
      return reply.code(answer.status).type('application/json').send(answer.body);
    });
  };
}
