// `trustmsg dev`'s Kafka broker (librdkafka's mock cluster, in process), as a
// newcomer meets it: start `trustmsg dev` on free ports, read the env file it
// writes, publish one message through trustmsg's HTTP API and one through the
// Kafka way in (the Submitter's default transport), and read both back with
// the SDK's own Kafka client, a @platformatic/kafka consumer group, and with
// `trustmsg tail --json`. The process is ended by its pid.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Producer } from '../../src/index.js';
import { Submitter } from '../../src/kafka.js';
import { GroupReader, header } from '../kafka.js';
import { eventually, ofMessage, quiet, rand, readTopic, recordKey, recordValue } from '../kit.js';

/** The `export NAME='value'` lines of the env file `trustmsg dev` writes. */
function parseEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const m of text.matchAll(/^export ([A-Z_]+)='([^']*)'$/gm)) env[m[1]!] = m[2]!;
  return env;
}

test("trustmsg dev's broker: messages published through trustmsg (HTTP and the Kafka way in) are read back by a @platformatic/kafka consumer group and by trustmsg tail", async () => {
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

    // The Kafka way in on the same broker, signed with the demo producer's secret.
    const viaKafka = `order-${rand()}`;
    const submitter = new Submitter({
      brokers: env['TRUSTMSG_BROKERS']!,
      topic: env['TRUSTMSG_SUBMIT_TOPIC']!,
      bizId: env['TRUSTMSG_DEMO_BIZ_ID']!,
      secret: env['TRUSTMSG_DEMO_SIGNING_SECRET']!,
      ackTimeoutMs: 15_000,
      logger: quiet,
    });
    try {
      await submitter.prepare({ message_key: viaKafka, topic, key: 'customer-8', payload: '{"total":43}' });
      await submitter.commit(viaKafka);
    } finally {
      await submitter.close();
    }

    // The SDK's own Kafka client reads both, as a consumer group.
    const reader = await GroupReader.open(`ts-dev-${rand()}`, topic, env['TRUSTMSG_BROKERS']);
    try {
      const seen = new Map<string, string>();
      while (seen.size < 2) {
        const rec = await reader.next();
        const k = header(rec, 'trustmsg-message-key');
        if (k !== undefined) seen.set(k, rec.value.toString('utf8'));
      }
      assert.equal(seen.get(key), '{"total":42}');
      assert.equal(seen.get(viaKafka), '{"total":43}');
    } finally {
      await reader.close();
    }
  } finally {
    if (dev.exitCode === null) {
      process.kill(dev.pid!, 'SIGTERM');
      await exited;
    }
    rmSync(data, { recursive: true, force: true });
  }
});
