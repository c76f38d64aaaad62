// Every case of the contract kit's vector files, asserted against the SDK.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  BadRequestError,
  checkAnswer,
  createCheckBackHandler,
  messageIdOf,
  outboxRow,
  parseJson,
  parseCheckRequest,
  signSubmit,
  submitRecord,
  submitSigningInput,
  verifyCheckBack,
  WebhookVerificationError,
  type Message,
  type SubmitFields,
} from '../../src/index.js';
import { vectors, vectorsText } from '../vectors.js';

const b64 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'base64'));

interface SignatureCase {
  name: string;
  secret: string;
  headers: Record<string, string>;
  body: string;
  now: number;
  valid: boolean;
}

test('check-signatures.json: every case verifies as it says', () => {
  const v = vectors<{ tolerance_secs: number; cases: SignatureCase[] }>('check-signatures.json');
  assert.ok(v.cases.length >= 18);
  for (const c of v.cases) {
    const verify = (): void => {
      verifyCheckBack(c.secret, c.headers, c.body, { now: () => c.now, toleranceSecs: v.tolerance_secs });
    };
    if (c.valid) assert.doesNotThrow(verify, c.name);
    else assert.throws(verify, WebhookVerificationError, c.name);
    // Header names in any case, and as a fetch Headers.
    const upper = Object.fromEntries(Object.entries(c.headers).map(([k, val]) => [k.toUpperCase(), val]));
    if (c.valid) {
      verifyCheckBack(c.secret, upper, c.body, { now: () => c.now });
      verifyCheckBack(c.secret, new Headers(c.headers), Buffer.from(c.body), { now: () => c.now });
    }
  }
});

test('check-signatures.json: the handler answers 401 for every invalid case and never asks the decider', async () => {
  const v = vectors<{ cases: SignatureCase[] }>('check-signatures.json');
  for (const c of v.cases) {
    let asked = 0;
    const handle = createCheckBackHandler({
      secret: c.secret,
      now: () => c.now,
      decide: () => {
        asked++;
        return 'commit';
      },
      logger: { warn: () => undefined, error: () => undefined },
    });
    const answer = await handle(c.headers, c.body);
    if (c.valid) {
      assert.equal(answer.status, 200, c.name);
      assert.equal(asked, 1, c.name);
    } else {
      assert.equal(answer.status, 401, c.name);
      assert.equal(asked, 0, c.name);
    }
  }
});

test('check-bodies.json: requests parse (64-bit ids kept) and answers serialize', () => {
  // Read with the SDK's own JSON parser, so that 9007199254740993 keeps its last digit here too.
  const v = parseJson(vectorsText('check-bodies.json')) as unknown as {
    requests: Array<{ name: string; body: string; request: { message_id: bigint | number } & Record<string, unknown> }>;
    answers: Array<{ message_id: bigint | number; decision: 'commit' | 'rollback' | 'unknown'; answer: { message_id: bigint | number; decision: string } }>;
  };
  assert.ok(v.answers.some((a) => a.message_id === 9007199254740993n));
  for (const r of v.requests) {
    const parsed = parseCheckRequest(r.body);
    assert.deepEqual(parsed, { ...r.request, message_id: BigInt(r.request.message_id) }, r.name);
  }
  for (const a of v.answers) {
    const text = checkAnswer(BigInt(a.message_id), a.decision);
    assert.deepEqual(parseJson(text), a.answer);
  }
});

interface SubmitCase {
  name: string;
  op: 'prepare' | 'commit' | 'rollback';
  biz_id: string;
  message_key: string;
  topic: string;
  key: string | null;
  headers: Record<string, string>;
  value_base64?: string;
  signing_input_base64?: string;
  signature?: string;
  record?: { key: string; value_base64: string; headers: Array<[string, string]> };
}

function fields(c: SubmitCase): SubmitFields {
  return { op: c.op, biz_id: c.biz_id, message_key: c.message_key, topic: c.topic, key: c.key, headers: c.headers, value: b64(c.value_base64 ?? '') };
}

test('submit-records.json: every case signs to the same bytes and makes the same record', () => {
  const v = vectors<{ secret: string; cases: SubmitCase[]; ambiguous: SubmitCase[] }>('submit-records.json');
  assert.ok(v.cases.length >= 7);
  for (const c of v.cases) {
    assert.deepEqual(Buffer.from(submitSigningInput(fields(c))).toString('base64'), c.signing_input_base64, c.name);
    assert.equal(signSubmit(v.secret, fields(c)), c.signature, c.name);
    const record = submitRecord(v.secret, fields(c));
    assert.equal(record.key, c.record!.key, c.name);
    assert.equal(Buffer.from(record.value).toString('base64'), c.record!.value_base64, c.name);
    assert.deepEqual(record.headers, c.record!.headers, c.name);
  }
  for (const c of v.ambiguous) {
    assert.throws(
      () => submitRecord(v.secret, fields(c)),
      (e: unknown) => e instanceof BadRequestError && e.code === 'invalid_request',
      c.name,
    );
  }
});

test('record-headers.json: the inbox keys on the message id, or refuses the record', () => {
  const v = vectors<{ cases: Array<{ name: string; headers: Array<[string, string | null]>; message_id: number | null }> }>('record-headers.json');
  const raw = JSON.stringify(v);
  assert.ok(raw.includes('18446744073709551615'));
  for (const c of v.cases) {
    const header = c.headers.find(([k]) => k === 'trustmsg-message-id');
    const expected = c.message_id === null ? null : BigInt(header![1]!);
    assert.equal(messageIdOf(c.headers), expected, c.name);
    // As a Kafka client gives them: a Map of buffers.
    const map = new Map(c.headers.map(([k, val]) => [Buffer.from(k), val === null ? null : Buffer.from(val)]));
    assert.equal(messageIdOf(map), expected, c.name);
  }
  assert.equal(messageIdOf([['trustmsg-message-id', '18446744073709551615']]), 18446744073709551615n);
});

interface OutboxMessage {
  message_key: string;
  topic: string;
  payload_base64: string;
  key?: string;
  headers?: Record<string, string>;
  traceparent?: string;
  deliver_after_ms?: number;
}

export function outboxMessage(m: OutboxMessage): Message {
  return {
    message_key: m.message_key,
    topic: m.topic,
    payload: b64(m.payload_base64),
    key: m.key,
    headers: m.headers,
    traceparent: m.traceparent,
    deliver_after_ms: m.deliver_after_ms,
  };
}

test('outbox-rows.json: every valid message makes that row, every invalid one is refused with that code', () => {
  const v = vectors<{
    valid: Array<{ name: string; message: OutboxMessage; row: Record<string, unknown> }>;
    invalid: Array<{ name: string; message: OutboxMessage; error: string }>;
  }>('outbox-rows.json');
  for (const c of v.valid) {
    const row = outboxRow(outboxMessage(c.message));
    assert.deepEqual(
      {
        message_key: row.message_key,
        topic: row.topic,
        record_key: row.record_key,
        payload_base64: Buffer.from(row.payload).toString('base64'),
        headers: row.headers === null ? null : (JSON.parse(row.headers) as unknown),
        traceparent: row.traceparent,
        deliver: row.due === null ? null : 'afterMs' in row.due ? { after_ms: row.due.afterMs } : { at: row.due.at.toISOString() },
      },
      c.row,
      c.name,
    );
  }
  for (const c of v.invalid) {
    assert.throws(
      () => outboxRow(outboxMessage(c.message)),
      (e: unknown) => e instanceof BadRequestError && e.code === c.error,
      c.name,
    );
  }
});
