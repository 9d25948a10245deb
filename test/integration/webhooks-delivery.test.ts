import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { TestApp } from '../helpers/app';
import { useStack } from '../helpers/workers';
import { WebhookReceiver, verifySignature, type Received } from '../helpers/receiver';
import { attemptRows, deliverEvent, deliveryReaches } from '../helpers/deliveries';
import { eventually, jobReaches } from '../helpers/app';

const signedAt = (r: Received) => Number(r.headers['x-service-timestamp']);
const gaps = (hooks: Received[]) => hooks.slice(1).map((h, i) => h.at - hooks[i]!.at);

/** A receiver of the test's own, stopped when the test ends. */
async function withReceiver(fn: (receiver: WebhookReceiver) => Promise<void>): Promise<void> {
  const receiver = await new WebhookReceiver().start();
  try {
    await fn(receiver);
  } finally {
    await receiver.stop();
  }
}

describe('webhook delivery (docs/api.md#delivery-and-retries)', function () {
  this.timeout(60_000);
  // a Redis prefix of its own, a 1 s schedule and a 1.5 s timeout
  const stack = useStack({
    env: { REDIS_PREFIX: `webhooks_${Date.now()}`, WEBHOOK_RETRY_SCHEDULE: '1,1,1', WEBHOOK_TIMEOUT_MS: '1500' },
    queues: ['webhooks', 'webhooks-dead'],
  });
  let app: TestApp;
  before(() => ({ app } = stack));

  it('delivers on the first try, signed, and records the attempt in full', () =>
    withReceiver(async (receiver) => {
      const d = await deliverEvent(app.context, receiver.url);
      const [hook] = await receiver.waitFor(1);
      expect(verifySignature(d.key.webhookSecret, hook!)).to.equal(true);
      expect(hook!.headers).to.include({
        'content-type': 'application/json',
        'x-service-event': 'work_failed',
        'x-service-delivery': d.deliveryId,
      });
      expect(hook!.body).to.include({ event: 'work_failed', transaction_id: d.transactionId });

      const row = await deliveryReaches(app.context, d.deliveryId, 'delivered');
      expect(row).to.include({ attempts: 1, last_status_code: 200, next_attempt_at: null });
      const [attempt, ...more] = await attemptRows(app.context, d.deliveryId);
      expect(more).to.have.length(0);
      expect(attempt).to.include({
        delivery_id: d.deliveryId,
        event: 'work_failed',
        transaction_id: d.transactionId,
        api_key_id: d.key.id,
        url: receiver.url,
        attempt: 1,
        status_code: 200,
        error: null,
        next_attempt_at: null,
        outcome: 'delivered',
      });
      expect(attempt.event_id).to.be.a('string');
      expect(attempt.duration_ms).to.be.a('number').within(0, 1500);
    }));

  it('retries 500 three times on the schedule, then delivers once: four attempts of the same delivery', () =>
    withReceiver(async (receiver) => {
      receiver.respond = (_req, index) => ({ status: index < 3 ? 500 : 200 });
      const d = await deliverEvent(app.context, receiver.url);
      const hooks = await receiver.waitFor(4);
      const row = await deliveryReaches(app.context, d.deliveryId, 'delivered');

      expect(hooks.map((h) => h.headers['x-service-delivery'])).to.deep.equal(Array(4).fill(d.deliveryId));
      for (const hook of hooks) expect(verifySignature(d.key.webhookSecret, hook)).to.equal(true);
      expect(new Set(hooks.map((h) => h.raw)).size).to.equal(1);
      // signed afresh: each attempt's timestamp is its own, and three 1 s waits moved it on
      expect(signedAt(hooks[3]!)).to.be.greaterThan(signedAt(hooks[0]!));
      for (const gap of gaps(hooks)) expect(gap).to.be.within(950, 5000);

      expect(row.attempts).to.equal(4);
      const attempts = await attemptRows(app.context, d.deliveryId);
      expect(attempts.map((a) => [a.attempt, a.status_code, a.outcome])).to.deep.equal([
        [1, 500, 'retry'],
        [2, 500, 'retry'],
        [3, 500, 'retry'],
        [4, 200, 'delivered'],
      ]);
      for (const a of attempts.slice(0, 3)) expect(a.next_attempt_at.getTime() - a.created_at.getTime()).to.be.within(800, 1300);
      expect(attempts[3].next_attempt_at).to.equal(null);
      // delivered once: the job is finished, nothing further is scheduled
      await jobReaches(app.context.queues.webhooks, d.deliveryId, 'completed');
      expect(receiver.received).to.have.length(4);
    }));

  it('sends a 400 straight to the dead-letter queue, without a retry', () =>
    withReceiver(async (receiver) => {
      receiver.respond = () => ({ status: 400 });
      const d = await deliverEvent(app.context, receiver.url);
      await receiver.waitFor(1);
      const row = await deliveryReaches(app.context, d.deliveryId, 'dead');
      expect(row).to.include({ attempts: 1, last_status_code: 400, next_attempt_at: null });
      expect((await attemptRows(app.context, d.deliveryId)).map((a) => [a.status_code, a.outcome])).to.deep.equal([[400, 'dead']]);

      const deadLetter = await jobReaches(app.context.queues['webhooks-dead'], d.deliveryId, 'failed');
      expect(deadLetter.data).to.include({ deliveryId: d.deliveryId });
      expect(deadLetter.failedReason).to.include('HTTP 400').and.include(d.transactionId);
      const job = await jobReaches(app.context.queues.webhooks, d.deliveryId, 'failed');
      expect(job.attemptsMade).to.equal(1);
      expect(receiver.received).to.have.length(1);
    }));

  it('times out a receiver that never answers, retries on the schedule, then dead-letters it', () =>
    withReceiver(async (receiver) => {
      receiver.respond = () => 'hang';
      const d = await deliverEvent(app.context, receiver.url);
      const row = await deliveryReaches(app.context, d.deliveryId, 'dead', 30_000);
      expect(row.attempts).to.equal(4);
      expect(receiver.received.map((r) => r.headers['x-service-delivery'])).to.deep.equal(Array(4).fill(d.deliveryId));
      const attempts = await attemptRows(app.context, d.deliveryId);
      expect(attempts.map((a) => a.outcome)).to.deep.equal(['retry', 'retry', 'retry', 'dead']);
      for (const a of attempts) {
        expect(a.status_code).to.equal(null);
        expect(a.error).to.equal('no response within 1500 ms');
        expect(a.duration_ms).to.be.within(1400, 3000);
      }
      expect(await app.context.queues['webhooks-dead'].getJob(d.deliveryId)).to.not.equal(undefined);
    }));

  it('resolves a host name and connects to the address it vetted', () =>
    withReceiver(async (receiver) => {
      const url = receiver.url.replace('127.0.0.1', 'localhost');
      const d = await deliverEvent(app.context, url);
      const [hook] = await receiver.waitFor(1);
      expect(hook!.headers.host).to.match(/^localhost:\d+$/);
      await deliveryReaches(app.context, d.deliveryId, 'delivered');
    }));
});

describe('webhook delivery: Retry-After', function () {
  this.timeout(60_000);
  const stack = useStack({
    env: { REDIS_PREFIX: `webhooks_ra_${Date.now()}`, WEBHOOK_RETRY_SCHEDULE: '1,2,3' },
    queues: ['webhooks'],
  });
  let app: TestApp;
  before(() => ({ app } = stack));

  it('lengthens a wait up to the following step of the schedule, never beyond it', () =>
    withReceiver(async (receiver) => {
      receiver.respond = (_req, index) =>
        index === 0
          ? { status: 429, headers: { 'Retry-After': '2' } }
          : index === 1
            ? { status: 503, headers: { 'Retry-After': '3600' } }
            : { status: 200 };
      const d = await deliverEvent(app.context, receiver.url);
      const hooks = await receiver.waitFor(3);
      await deliveryReaches(app.context, d.deliveryId, 'delivered');

      const [first, second] = gaps(hooks) as [number, number];
      expect(first, 'step 1 s, Retry-After 2 s').to.be.within(1950, 3500);
      expect(second, 'step 2 s, Retry-After 3600 s capped at the next step, 3 s').to.be.within(2950, 6000);
      const attempts = await attemptRows(app.context, d.deliveryId);
      expect(attempts.map((a) => a.status_code)).to.deep.equal([429, 503, 200]);
      const waits = attempts.slice(0, 2).map((a) => a.next_attempt_at.getTime() - a.created_at.getTime());
      expect(waits[0]).to.be.within(1800, 2300);
      expect(waits[1]).to.be.within(2800, 3300);
    }));
});

describe('webhook delivery: concurrency', function () {
  this.timeout(60_000);
  const stack = useStack({
    env: { REDIS_PREFIX: `webhooks_cc_${Date.now()}`, WEBHOOK_CONCURRENCY: '4', WEBHOOK_TIMEOUT_MS: '20000', WEBHOOK_RETRY_SCHEDULE: '1' },
    queues: ['webhooks'],
  });
  let app: TestApp;
  before(() => ({ app } = stack));

  it('does not let a hanging endpoint delay delivery to a healthy one', async () => {
    const hanging = await new WebhookReceiver().start();
    const healthy = await new WebhookReceiver().start();
    hanging.respond = () => 'hang';
    try {
      const stuck = await Promise.all([1, 2, 3].map(() => deliverEvent(app.context, hanging.url)));
      await hanging.waitFor(3); // all three are in flight at once, each waiting for an answer that never comes

      const started = Date.now();
      const d = await deliverEvent(app.context, healthy.url);
      await healthy.waitFor(1);
      await deliveryReaches(app.context, d.deliveryId, 'delivered');
      expect(Date.now() - started).to.be.below(5000);
      // meanwhile none of the hanging deliveries has finished its first attempt
      for (const s of stuck) expect(await attemptRows(app.context, s.deliveryId)).to.have.length(0);
    } finally {
      await hanging.stop();
      await healthy.stop();
    }
  });

  it('POSTs at most WEBHOOK_CONCURRENCY at once while the worker holds twice as many jobs: the others wait their turn, then deliver', async () => {
    let open = 0;
    let most = 0;
    // answers are held until the test lets them go, then given at once
    const held: (() => void)[] = [];
    let holding = true;
    const server = http.createServer((req, res) => {
      open += 1;
      most = Math.max(most, open);
      res.on('finish', () => (open -= 1));
      req.resume().on('end', () => (holding ? held.push(() => res.end('ok')) : res.end('ok')));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
      const deliveries = [];
      for (let i = 0; i < 12; i++) deliveries.push(await deliverEvent(app.context, url));
      await eventually(async () => ((await app.context.queues.webhooks.getActiveCount()) === 8 ? true : undefined), '8 active jobs');
      await eventually(async () => (held.length === 4 ? true : undefined), 'four POSTs held');
      expect(open, 'POSTs in flight while 8 jobs are active').to.equal(4);
      holding = false;
      held.splice(0).forEach((answer) => answer());
      const rows = [];
      for (const d of deliveries) rows.push(await deliveryReaches(app.context, d.deliveryId, 'delivered'));
      expect(most, 'POSTs in flight at once, ever').to.equal(4);
      expect(
        rows.map((r) => r.attempts),
        'each delivered at its first attempt',
      ).to.deep.equal(Array(12).fill(1));
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
