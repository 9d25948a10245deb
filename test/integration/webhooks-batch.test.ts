import dns from 'node:dns';
import { expect } from 'chai';
import type { TestApp } from '../helpers/app';
import { eventually } from '../helpers/app';
import { useStack } from '../helpers/workers';
import { WebhookReceiver, verifySignature } from '../helpers/receiver';
import { attemptRows, deliveryReaches, recordDelivery, type TestDelivery } from '../helpers/deliveries';
import { enqueueCommitted, enqueueDeliveries } from '../../shared/webhooks/enqueue';

/**
 * Deliveries enqueued together (a block's outcomes) to one URL share a `deliver-batch` job for their first
 * attempts (shared/webhooks/enqueue.ts); each keeps its own attempt rows, retry schedule and dead letter.
 */
describe('webhook delivery: first attempts batched per destination', function () {
  this.timeout(60_000);
  const stack = useStack({
    env: { REDIS_PREFIX: `webhooks_batch1_${Date.now()}`, WEBHOOK_RETRY_SCHEDULE: '1,1' },
    queues: ['webhooks', 'webhooks-dead'],
  });
  let app: TestApp;
  let receiver: WebhookReceiver;
  before(async () => {
    ({ app } = stack);
    receiver = await new WebhookReceiver().start();
  });
  after(() => receiver.stop());
  const systemLookup = dns.lookup;
  afterEach(() => (dns.lookup = systemLookup));

  const record = async (url: string, count: number) => {
    const made: TestDelivery[] = [];
    for (let i = 0; i < count; i++) made.push(await recordDelivery(app.context, url));
    return made;
  };
  const currentJob = async (d: TestDelivery) =>
    (await app.context.db('webhook_deliveries').where({ id: d.deliveryId }).first('current_job_id')).current_job_id as string | null;

  it('one job for several deliveries to one URL: one delivered, one retried on its own job, one dead, each with its own attempts', async () => {
    const url = `${receiver.url}/batch-outcomes`;
    const [ok, flaky, gone] = await record(url, 3);
    const tries = new Map<string, number>();
    receiver.respond = (req) => {
      const id = String(req.headers['x-service-delivery']);
      tries.set(id, (tries.get(id) ?? 0) + 1);
      if (id === gone!.deliveryId) return { status: 410 };
      if (id === flaky!.deliveryId && tries.get(id) === 1) return { status: 503 };
      return { status: 200 };
    };
    await enqueueDeliveries(
      app.context,
      [ok!, flaky!, gone!].map((d) => ({ id: d.deliveryId, traceparent: null, labels: d.labels })),
    );

    const batchJobId = await currentJob(ok!);
    expect(batchJobId).to.match(/^batch-/);
    expect(await currentJob(gone!)).to.equal(batchJobId);
    const batch = await app.context.queues.webhooks.getJob(batchJobId!);
    // labelled with the one host its deliveries go to (never the URL's path)
    const host = new URL(receiver.url).host;
    expect(batch!.name).to.equal(`deliver-batch host:${host}`);
    expect(batch!.data).to.deep.equal({ deliveryIds: [ok!.deliveryId, flaky!.deliveryId, gone!.deliveryId], host });

    await deliveryReaches(app.context, ok!.deliveryId, 'delivered');
    await deliveryReaches(app.context, gone!.deliveryId, 'dead');
    await deliveryReaches(app.context, flaky!.deliveryId, 'delivered');

    expect((await attemptRows(app.context, ok!.deliveryId)).map((a) => [a.attempt, a.status_code, a.outcome])).to.deep.equal([
      [1, 200, 'delivered'],
    ]);
    expect((await attemptRows(app.context, gone!.deliveryId)).map((a) => [a.attempt, a.status_code, a.outcome])).to.deep.equal([
      [1, 410, 'dead'],
    ]);
    const flakyAttempts = await attemptRows(app.context, flaky!.deliveryId);
    expect(flakyAttempts.map((a) => [a.attempt, a.status_code, a.outcome])).to.deep.equal([
      [1, 503, 'retry'],
      [2, 200, 'delivered'],
    ]);
    // the first wait of the schedule (1 s), then its own job with the rest of the schedule
    const wait = flakyAttempts[0].next_attempt_at.getTime() - flakyAttempts[0].created_at.getTime();
    expect(wait).to.be.within(800, 1300);
    const retryJobId = await currentJob(flaky!);
    expect(retryJobId).to.match(new RegExp(`^${flaky!.deliveryId}-next-`));
    const retryJob = await app.context.queues.webhooks.getJob(retryJobId!);
    expect(retryJob!.data).to.deep.equal({ deliveryId: flaky!.deliveryId, retriesMade: 1, ...flaky!.labels });
    expect(retryJob!.name).to.equal(`deliver work_failed org:${flaky!.organizationId} tx:${flaky!.transactionId} host:${host}`);
    expect(retryJob!.opts.attempts, 'the rest of the schedule').to.equal(2);

    // every request signed afresh with its key's secret, each delivery under its own id
    const hooks = receiver.received.filter((r) => [ok, flaky, gone].some((d) => d!.deliveryId === r.headers['x-service-delivery']));
    expect(hooks).to.have.length(4);
    for (const hook of hooks) {
      const d = [ok, flaky, gone].find((x) => x!.deliveryId === hook.headers['x-service-delivery'])!;
      expect(verifySignature(d.key.webhookSecret, hook)).to.equal(true);
    }

    // the dead one is in the dead-letter queue; the batch job completed with each delivery's outcome
    const deadLetter = await eventually(() => app.context.queues['webhooks-dead'].getJob(gone!.deliveryId), 'the dead letter');
    expect(deadLetter.data).to.deep.include({ deliveryId: gone!.deliveryId, ...gone!.labels });
    const done = await eventually(async () => {
      const job = await app.context.queues.webhooks.getJob(batchJobId!);
      return (await job?.isCompleted()) ? job : undefined;
    }, 'the batch job completed');
    expect(Object.keys(done.returnvalue)).to.have.members([ok!.deliveryId, flaky!.deliveryId, gone!.deliveryId]);
    expect(done.returnvalue[ok!.deliveryId]).to.match(/^delivered \(attempt 1, HTTP 200\)/);
    expect(done.returnvalue[flaky!.deliveryId]).to.match(/HTTP 503.*next in 1 s as job/);
    expect(done.returnvalue[gone!.deliveryId]).to.match(/HTTP 410.*dead-lettered to webhooks-dead/);
  });

  it('groups by URL: a URL with one delivery keeps the job named after it, those sharing a URL share a job', async () => {
    receiver.respond = () => ({ status: 200 });
    const shared = await record(`${receiver.url}/shared`, 2);
    const [alone] = await record(`${receiver.url}/alone`, 1);
    await enqueueDeliveries(
      app.context,
      [shared[0]!, alone!, shared[1]!].map((d) => ({ id: d.deliveryId, traceparent: null })),
    );
    for (const d of [...shared, alone!]) await deliveryReaches(app.context, d.deliveryId, 'delivered');
    const [first, second] = [await currentJob(shared[0]!), await currentJob(shared[1]!)];
    expect(first).to.match(/^batch-/);
    expect(second).to.equal(first);
    expect(await currentJob(alone!), 'its own job, named after it').to.equal(null);
    expect((await app.context.queues.webhooks.getJob(alone!.deliveryId))!.data).to.deep.equal({ deliveryId: alone!.deliveryId });
  });

  it('enqueues the deliveries of commits that end while an enqueue is under way together: one job for those to one URL', async () => {
    receiver.respond = () => ({ status: 200 });
    // five outcomes committed one by one (as each chain job finalizes its own transaction), all at once
    const made = await record(`${receiver.url}/committed`, 5);
    await Promise.all(made.map((d) => enqueueCommitted(app.context, [{ id: d.deliveryId, traceparent: null }])));
    for (const d of made) await deliveryReaches(app.context, d.deliveryId, 'delivered');
    const jobs = await Promise.all(made.map(currentJob));
    // the first found no enqueue under way and went at once, alone; the four committed meanwhile share one job
    expect(jobs[0], 'its own job, named after it').to.equal(null);
    expect(jobs[1]).to.match(/^batch-/);
    expect(new Set(jobs.slice(1)).size).to.equal(1);
    expect((await app.context.queues.webhooks.getJob(jobs[1]!))!.data).to.deep.include({
      deliveryIds: made.slice(1).map((d) => d.deliveryId),
    });
  });
  it("resolves a webhook host once for the deliveries that go to it, then reuses the worker's answer", async () => {
    // the system resolver answers for this run's own name (the worker resolves with dns.lookup, as in production)
    const host = `hooks-${Date.now().toString(36)}.test`;
    const asked: string[] = [];
    (dns as { lookup: unknown }).lookup = (hostname: string, options: unknown, callback: (...args: unknown[]) => void) => {
      if (hostname !== host) return (systemLookup as (...args: unknown[]) => void).call(dns, hostname, options, callback);
      asked.push(hostname);
      setTimeout(() => callback(null, [{ address: '127.0.0.1', family: 4 }]), 20);
    };
    try {
      const url = `http://${host}:${new URL(receiver.url).port}/resolved`;
      const enqueue = (made: TestDelivery[]) =>
        enqueueDeliveries(
          app.context,
          made.map((d) => ({ id: d.deliveryId, traceparent: null, labels: d.labels })),
        );
      const [later, ...together] = await record(url, 5);
      asked.length = 0; // each key's URL was vetted as it was created
      await enqueue(together);
      // deadlines within mocha's, so that the patched lookup never outlives the test (afterEach restores it too)
      for (const d of together) await deliveryReaches(app.context, d.deliveryId, 'delivered', 8_000);
      await enqueue([later!]);
      await deliveryReaches(app.context, later!.deliveryId, 'delivered', 8_000);
      expect(asked).to.deep.equal([host]);
      // each sent with its host's name, to the address it was resolved to
      const arrived = receiver.received.filter((h) => h.headers.host === `${host}:${new URL(receiver.url).port}`);
      expect(arrived.map((h) => h.connection.localAddress)).to.deep.equal(Array(5).fill('127.0.0.1'));
    } finally {
      dns.lookup = systemLookup;
    }
  });
});
