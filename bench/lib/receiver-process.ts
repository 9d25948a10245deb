import { WebhookReceiver } from '../../test/helpers/receiver';

/**
 * The webhooks bench's receiver in a process of its own, so that its CPU is the receiver's alone and the bench
 * process's other work (the embedded chain, s3rver) does not delay its answers: the test harness's
 * WebhookReceiver answering 200. Sends `{ url }` once listening; `{ waitFor: n }` is answered `{ last }` (the
 * raw body of the last request) once n more requests have arrived. Requests are dropped once counted.
 */
async function main(): Promise<void> {
  const receiver = await new WebhookReceiver().start();
  process.send!({ url: receiver.url });
  process.on('message', async (m: { waitFor: number }) => {
    const arrived = await receiver.waitFor(m.waitFor, 600_000);
    const last = arrived[arrived.length - 1]!.raw;
    receiver.received.splice(0, m.waitFor);
    process.send!({ last });
  });
}

void main();
