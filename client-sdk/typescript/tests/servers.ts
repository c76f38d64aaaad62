// Real check-back servers: the SDK's handler in Express, Fastify, and Hono
// (the standard Request/Response handler), each on a free port of 127.0.0.1.
import { serve } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkBackFetchHandler, type CheckBackOptions } from '../src/index.js';
import { checkBackExpress } from '../src/express.js';
import { checkBackFastify } from '../src/fastify.js';
import { close } from './kit.js';

export type Framework = 'express' | 'fastify' | 'hono';
export const FRAMEWORKS: Framework[] = ['hono', 'express', 'fastify'];

export interface Running {
  /** The check-back endpoint's URL. */
  url: string;
  close(): Promise<void>;
}

export async function checkServer(framework: Framework, options: CheckBackOptions): Promise<Running> {
  const path = '/trustmsg/check';
  if (framework === 'express') {
    const app = express();
    app.post(path, checkBackExpress(options));
    // The application's own JSON routes after it, as the README says.
    app.use(express.json());
    app.post('/orders', (_req, res) => res.json({ ok: true }));
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((r) => server.once('listening', () => r()));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`, close: () => close(server) };
  }
  if (framework === 'fastify') {
    const app = Fastify();
    await app.register(checkBackFastify(options));
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}${path}`, close: () => app.close() };
  }
  const app = new Hono();
  const handler = checkBackFetchHandler(options);
  app.post(path, (c) => handler(c.req.raw));
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
  if (!server.listening) await new Promise<void>((r) => server.once('listening', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`, close: () => close(server) };
}
