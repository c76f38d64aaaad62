// What the scenario tests share: the kit's environment, producers registered
// with the admin token, the producer's databases, real check-back servers,
// and waiting for what the service does.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Producer, type Logger, type MessageView } from '../src/index.js';
import * as my from '../src/mysql.js';
import * as pgsdk from '../src/postgres.js';

export const quiet: Logger = { warn: () => undefined, error: () => undefined };

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the scenario tests under the contract kit (client-sdk/conformance/kit run -- …)`);
  return v;
}

export const kit = {
  get url(): string {
    return need('TRUSTMSG_KIT_URL');
  },
  get proxyUrl(): string {
    return need('TRUSTMSG_KIT_PROXY_URL');
  },
  get admin(): string {
    return need('TRUSTMSG_KIT_ADMIN_TOKEN');
  },
  get kafka(): string {
    return need('TRUSTMSG_KIT_KAFKA');
  },
  get submitTopic(): string {
    return need('TRUSTMSG_KIT_SUBMIT_TOPIC');
  },
  get mysqlUrl(): string {
    return need('TRUSTMSG_KIT_MYSQL_URL');
  },
  get postgresUrl(): string {
    return need('TRUSTMSG_KIT_POSTGRES_URL');
  },
  get outboxBizId(): string {
    return need('TRUSTMSG_KIT_OUTBOX_BIZ_ID');
  },
  get outboxTopicPrefix(): string {
    return need('TRUSTMSG_KIT_OUTBOX_TOPIC_PREFIX');
  },
};

/** A random part for ids, keys and topics: tests run at once and share the service. */
export const rand = (): string => randomBytes(4).toString('hex');

export interface Registered {
  bizId: string;
  token: string;
  secret: string;
}

/** Registers producer `bizId` (its own per test) with `verifyUrl`, first check-back after 1 s (or `firstVerifyAfterMs`). */
export async function register(bizId: string, verifyUrl: string, topics: string[] = ['*'], firstVerifyAfterMs = 1000): Promise<Registered> {
  const res = await fetch(`${kit.url}/v1/producers/${bizId}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${kit.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ verify_url: verifyUrl, first_verify_after_ms: firstVerifyAfterMs, topics }),
  });
  const body = (await res.json()) as { token?: string; signing_secret?: string };
  if (!res.ok || !body.token || !body.signing_secret) throw new Error(`registering ${bizId}: ${res.status} ${JSON.stringify(body)}`);
  return { bizId, token: body.token, secret: body.signing_secret };
}

/** Points producer `bizId`'s check-back at `verifyUrl` (its token and secret stay). */
export async function setVerifyUrl(bizId: string, verifyUrl: string): Promise<void> {
  const res = await fetch(`${kit.url}/v1/producers/${bizId}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${kit.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ verify_url: verifyUrl, first_verify_after_ms: 1000, topics: ['*'] }),
  });
  if (!res.ok) throw new Error(`updating ${bizId}: ${res.status} ${await res.text()}`);
}

export function producerFor(r: Registered, baseURL = kit.url): Producer {
  return new Producer({ baseURL, bizId: r.bizId, token: r.token, logger: quiet });
}

/** Waits until `probe` returns something other than undefined. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${last instanceof Error ? last.message : JSON.stringify(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The message's view once `ok` holds for it. */
export function viewWhen(p: Producer, key: string, ok: (v: MessageView) => boolean, timeoutMs = 30_000): Promise<MessageView> {
  return eventually(
    `${key} to be as expected`,
    async () => {
      const v = await p.get(key);
      return ok(v) ? v : undefined;
    },
    timeoutMs,
  );
}

export async function mysqlPool(): Promise<mysql.Pool> {
  const pool = mysql.createPool({ uri: kit.mysqlUrl, connectionLimit: 6 });
  await my.createTables(pool);
  return pool;
}

export async function postgresPool(): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: kit.postgresUrl, max: 6 });
  await pgsdk.createTables(pool);
  return pool;
}

/** Starts `server` on a free port of 127.0.0.1; returns its base URL. */
export async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export function close(server: Server): Promise<void> {
  return new Promise((r) => {
    server.closeAllConnections();
    server.close(() => {
      r();
    });
  });
}

export { createServer };

/** A record as `trustmsg tail --json` prints it. */
export interface TailRecord {
  topic: string;
  partition: number;
  offset: number;
  key?: string | null;
  key_base64?: string;
  payload_base64?: string;
  payload?: string;
  headers: Array<{ name: string; value?: string | null; value_base64?: string }>;
}

export function recordKey(r: TailRecord): Buffer | null {
  if (r.key_base64 !== undefined) return Buffer.from(r.key_base64, 'base64');
  return r.key === undefined || r.key === null ? null : Buffer.from(r.key, 'utf8');
}

export function recordValue(r: TailRecord): Buffer {
  if (r.payload_base64 !== undefined) return Buffer.from(r.payload_base64, 'base64');
  return Buffer.from(r.payload ?? '', 'utf8');
}

export function recordHeaders(r: TailRecord): Array<[string, string | null]> {
  return r.headers.map((h) => [h.name, h.value_base64 !== undefined ? Buffer.from(h.value_base64, 'base64').toString('utf8') : (h.value ?? null)]);
}

/**
 * Reads `topic` from the beginning with the service's own `trustmsg tail`
 * (librdkafka, which the kit's mock broker speaks: see the README for why
 * not a JavaScript client) until `done` holds for what was read.
 */
export async function readTopic(
  topic: string,
  done: (records: TailRecord[]) => boolean,
  timeoutMs = 30_000,
  brokers: string = kit.kafka,
): Promise<TailRecord[]> {
  const { spawn } = await import('node:child_process');
  const bin = process.env['TRUSTMSG_KIT_BIN'] ?? 'trustmsg';
  const child = spawn(bin, ['tail', '--brokers', brokers, '--topic', topic, '--from-beginning', '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const records: TailRecord[] = [];
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  return new Promise((resolve, reject) => {
    let buffered = '';
    const finish = (e?: Error): void => {
      clearTimeout(timer);
      child.kill('SIGTERM');
      if (e) reject(e);
      else resolve(records);
    };
    const timer = setTimeout(() => {
      finish(new Error(`reading ${topic}: not there within ${timeoutMs} ms; read ${JSON.stringify(records)}; tail said ${err.trim()}`));
    }, timeoutMs);
    child.stdout.on('data', (c: Buffer) => {
      buffered += c.toString();
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl).trim();
        buffered = buffered.slice(nl + 1);
        if (line.startsWith('{')) records.push(JSON.parse(line) as TailRecord);
      }
      if (done(records)) finish();
    });
    child.on('exit', (code) => {
      if (!done(records)) finish(new Error(`trustmsg tail exited with ${code}: ${err.trim()}`));
    });
  });
}

/** The records of `topic` whose key is `key`. */
export function withKey(records: TailRecord[], key: string): TailRecord[] {
  return records.filter((r) => recordKey(r)?.toString('utf8') === key);
}

/** The records carrying `trustmsg-message-key: messageKey`. */
export function ofMessage(records: TailRecord[], messageKey: string): TailRecord[] {
  return records.filter((r) => recordHeaders(r).some(([k, v]) => k === 'trustmsg-message-key' && v === messageKey));
}
