// The README's example: prepare, a local transaction, commit; then read the message back.
import { ConflictError, Producer } from '@trustmsg/client';

const producer = new Producer({
  baseURL: process.env['TRUSTMSG_URL'] ?? 'http://127.0.0.1:8080',
  bizId: process.env['TRUSTMSG_DEMO_BIZ_ID'] ?? 'order-service',
  token: process.env['TRUSTMSG_DEMO_TOKEN'] ?? '',
});

const orderId = `A-${Date.now()}`;
const result = await producer.transaction(
  { message_key: orderId, topic: 'orders', key: 'alice', payload: JSON.stringify({ order_id: orderId }) },
  async (prepared) => {
    // Your local transaction goes here (see @trustmsg/client/mysql or /postgres for the barrier).
    console.log(`prepared message ${prepared.id}`);
    return orderId;
  },
);
console.log(`${result.value}: ${result.status}`); // A-…: committed

try {
  await producer.prepare({ message_key: orderId, topic: 'orders', payload: 'other content' });
} catch (e) {
  if (e instanceof ConflictError)
    console.log(`same key, other content: ${e.code}`); // prepare_conflict
  else throw e;
}
console.log((await producer.get(orderId)).status); // COMMITTED
