import http from 'node:http';
import { expect } from 'chai';
import { Queue } from 'bullmq';
import { eventually, startApp, type TestApp } from '../helpers/app';
import { spawnWorker, type WorkerProcess } from '../helpers/workers';
import { configWith, testServices } from '../helpers/services';
import { attemptRows, deliverEvent, deliveryReaches } from '../helpers/deliveries';
import { QUEUE_DEFINITIONS } from '../../shared/queue/queues';
import { bullPrefix } from '../../shared/redis/settings';
import { maxStalledCountOf } from '../../jobs/workers';
import type { Env, QueueName } from '../../shared/config';
import { createRedis } from '../../shared/redis/client';

/**
 * Stalls (issue 17): a job whose worker process dies is run again by another, as often as its queue allows;
 * each queue's allowance is set on purpose.
 */
describe('jobs whose worker dies mid-job', function () {
  this.timeout(180_000);
  const env: Env = { REDIS_PREFIX: `stalls_${Date.now()}`, WORKER_LOCK_MS: '1500' };
  let app: TestApp;
  before(async () => (app = await startApp(configWith(env))));
  after(() => app.close());

  it('every queue allows stalls on purpose: as many as its attempts, the webhooks as many as the schedule has steps', () => {
    const expected: Record<QueueName, number> = {
      prepare: 2,
      chain: 20,
      webhooks: app.context.config.webhooks.retrySchedule.length,
      'webhooks-dead': 3,
      maintenance: 3,
      certificates: 5,
    };
    for (const name of Object.keys(QUEUE_DEFINITIONS) as QueueName[])
      expect(maxStalledCountOf(app.context, name), name).to.equal(expected[name]);
    expect(maxStalledCountOf(app.context, 'webhooks')).to.be.greaterThan(2);
  });

  it('a webhook delivery whose worker is SIGKILLed twice mid-request is delivered once by the third', async () => {
    // a receiver that holds the first two requests open (the worker dies meanwhile) and acknowledges the third
    const seen: { delivery: string; signature: string }[] = [];
    const arrived: (() => void)[] = [];
    const receiver = http.createServer((req, res) => {
      req.resume();
      seen.push({ delivery: String(req.headers['x-service-delivery']), signature: String(req.headers['x-service-signature']) });
      arrived.shift()?.();
      if (seen.length >= 3) res.writeHead(200).end();
      else res.on('close', () => undefined); // left hanging: its worker is killed
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;
    const nextRequest = () => new Promise<void>((resolve) => arrived.push(resolve));
    const workers: WorkerProcess[] = [];
    const start = () => {
      const w = spawnWorker({ ...testServices().env, ...env, WORKER_QUEUES: 'webhooks', LOG_LEVEL: 'warn' });
      workers.push(w);
      return w;
    };
    try {
      let request = nextRequest();
      const delivery = await deliverEvent(app.context, url);
      for (let kill = 0; kill < 2; kill++) {
        const worker = start();
        await request;
        request = nextRequest();
        worker.kill('SIGKILL');
        await worker.exited;
      }
      start();
      await request;
      await deliveryReaches(app.context, delivery.deliveryId, 'delivered', 60_000);
      expect(seen.map((s) => s.delivery)).to.deep.equal([delivery.deliveryId, delivery.deliveryId, delivery.deliveryId]);
      // one acknowledged attempt recorded; the killed ones never answered
      const attempts = await attemptRows(app.context, delivery.deliveryId);
      expect(attempts.filter((a) => a.status_code === 200)).to.have.length(1);
      const queue = new Queue('webhooks', {
        connection: createRedis(app.context.config.redis, 'worker', 'stalls-test-queue'),
        prefix: bullPrefix(app.context.config.redis, 'webhooks'),
      });
      try {
        const failed = await queue.getFailed();
        expect(failed.map((j) => j.failedReason)).to.deep.equal([]);
        await eventually(async () => ((await queue.getCompletedCount()) === 1 ? true : undefined), 'the job to complete, once');
      } finally {
        await queue.close();
      }
    } finally {
      for (const w of workers) w.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.exited));
      receiver.closeAllConnections();
      receiver.close();
    }
  });
});
