import type { MessageView } from './types.js';

/** A receipt that is trustmsg's message view (a `Producer`'s), not a Kafka acknowledgement (a `Submitter`'s). */
export function isView(receipt: unknown): receipt is MessageView {
  return typeof receipt === 'object' && receipt !== null && typeof (receipt as { status?: unknown }).status === 'string' && 'id' in receipt;
}
