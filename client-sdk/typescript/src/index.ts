/**
 * trustmsg's TypeScript SDK. The root export has what needs no database nor
 * Kafka client: the HTTP {@link Producer}, the errors, the transaction helper,
 * the check-back verifier and its `Request`/`Response` handler, the record
 * header and signing helpers. Subpaths bring the rest:
 * `@trustmsg/client/mysql`, `/postgres`, `/express`, `/fastify`, `/kafka`, and
 * the ORM adapters `/prisma`, `/drizzle`, `/kysely`, `/typeorm`.
 */
export { Producer, backoffDelay, prepareRequest, type ProducerOptions } from './client.js';
export * from './errors.js';
export { runTransaction, type TransactionOptions, type TransactionResult, type WayIn } from './transaction.js';
export {
  checkAnswer,
  checkBackFetchHandler,
  createCheckBackHandler,
  DEFAULT_CHECK_PATH,
  DEFAULT_TOLERANCE_SECS,
  MAX_BODY_BYTES,
  parseCheckRequest,
  signCheckBack,
  verifyCheckBack,
  type CheckBackAnswer,
  type CheckBackOptions,
  type Decider,
  type HeaderSource,
  type VerifyOptions,
} from './checkback.js';
export { messageIdOf, MESSAGE_ID_HEADER, type RecordHeaders } from './headers.js';
export { signSubmit, submitRecord, submitSigningInput, type SubmitFields, type SubmitOp, type SubmitRecord } from './submit.js';
export { outboxRow, OUTBOX_TABLE, type OutboxRow } from './outbox.js';
export { MAX_DELIVERY_DELAY_MS } from './message.js';
export { parseJson, type Json } from './json.js';
export type { CallOptions, CheckRequest, Decision, Message, MessageStatus, MessageView, SendStatus } from './types.js';
// eslint-disable-next-line @typescript-eslint/no-deprecated -- still exported for the old form's users
export { structuredLogger, type AnyLogger, type Logger, type MessageFirstLogger } from './logger.js';
export { VERSION } from './version.js';
