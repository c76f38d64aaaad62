// `trustmsg dev`'s Kafka broker (librdkafka's mock cluster, in process), as a
// newcomer meets it: start `trustmsg dev` on free ports, read the env file it
// writes, publish a message through trustmsg with the SDK, and read it back
// with the reader the README names for this broker, `trustmsg tail --json`
// (librdkafka). The SDK's own Kafka client, @platformatic/kafka, cannot talk
// to this broker; the test holds the cause (ApiVersions v3 answered 35,
// UNSUPPORTED_VERSION), so that it fails, and the README is changed, the day
// the broker answers it. The process is ended by its pid.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Admin } from '@platformatic/kafka';
import { Producer } from '../../src/index.js';
import { eventually, ofMessage, quiet, rand, readTopic, recordKey, recordValue } from '../kit.js';

/** The `export NAME='value'` lines of the env file `trustmsg dev` writes. */
function parseEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const m of text.matchAll(/^export ([A-Z_]+)='([^']*)'$/gm)) env[m[1]!] = m[2]!;
  return env;
}

test("trustmsg dev's broker: a message published through trustmsg is read back (trustmsg tail), and @platformatic/kafka's refusal is the known one", async () => {
  const bin = process.env['TRUSTMSG_KIT_BIN'] ?? process.env['TRUSTMSG_BIN'] ?? 'trustmsg';
  const data = mkdtempSync(join(tmpdir(), 'ts-dev-broker-'));
  const dev = spawn(bin, ['dev', '--data', data, '--listen', '127.0.0.1:0', '--kafka-listen', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let said = '';
  dev.stderr.on('data', (c: Buffer) => (said += c.toString()));
  const exited = new Promise<void>((r) => dev.on('exit', () => r()));
  try {
    const env = await eventually(
      'trustmsg dev to write its env file',
      async () => {
        if (dev.exitCode !== null) throw new Error(`trustmsg dev exited with ${dev.exitCode}: ${said}`);
        const e = parseEnv(readFileSync(join(data, 'env'), 'utf8'));
        return e['TRUSTMSG_URL'] && e['TRUSTMSG_BROKERS'] && e['TRUSTMSG_DEMO_TOKEN'] && e['TRUSTMSG_DEMO_BIZ_ID'] ? e : undefined;
      },
      20_000,
    );
    const p = new Producer({ baseURL: env['TRUSTMSG_URL']!, bizId: env['TRUSTMSG_DEMO_BIZ_ID']!, token: env['TRUSTMSG_DEMO_TOKEN']!, logger: quiet });
    const topic = `dev-orders-${rand()}`;
    const key = `order-${rand()}`;
    await p.prepare({ message_key: key, topic, key: 'customer-7', payload: '{"total":42}' });
    await p.commit(key);

    const records = await readTopic(topic, (rs) => ofMessage(rs, key).length > 0, 30_000, env['TRUSTMSG_BROKERS']);
    const ours = ofMessage(records, key);
    assert.equal(ours.length, 1);
    assert.deepEqual(recordKey(ours[0]!), Buffer.from('customer-7'));
    assert.equal(recordValue(ours[0]!).toString('utf8'), '{"total":42}');

    const admin = new Admin({ clientId: 'ts-dev-broker', bootstrapBrokers: [env['TRUSTMSG_BROKERS']!], retries: 0 });
    try {
      await assert.rejects(
        admin.metadata({ topics: [topic] }),
        (e: unknown) => {
          const err = e as { message?: string; response?: { errorCode?: number } };
          assert.match(String(err.message), /ApiVersions\(v3\)/, 'the first request, ApiVersions v3');
          assert.equal(err.response?.errorCode, 35, 'answered UNSUPPORTED_VERSION (the mock serves ApiVersions v0 to v2)');
          return true;
        },
        'if @platformatic/kafka now reads the dev broker, say so in the README and test it here',
      );
    } finally {
      await admin.close();
    }
  } finally {
    if (dev.exitCode === null) {
      process.kill(dev.pid!, 'SIGTERM');
      await exited;
    }
    rmSync(data, { recursive: true, force: true });
  }
});
