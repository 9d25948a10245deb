import { expect } from 'chai';
import { eventually, type TestApp } from '../helpers/app';
import { useStack } from '../helpers/workers';
import { attemptRows, deliverEvent } from '../helpers/deliveries';
import { PRUNE_WEBHOOK_ATTEMPTS_JOB, scheduleMaintenance } from '../../jobs/maintenance/processor';

describe('webhook attempts retention', function () {
  this.timeout(60_000);
  // a Redis prefix of its own, a maintenance worker and no delivery worker: the delivery stays as written
  const stack = useStack({ env: { REDIS_PREFIX: `retention_${Date.now()}` }, queues: ['maintenance'] });
  let app: TestApp;
  before(() => ({ app } = stack));

  it('prunes attempts older than the retention (30 days by default) through the maintenance queue', async () => {
    expect(stack.config.webhooks.attemptRetentionDays).to.equal(30);
    const d = await deliverEvent(app.context, 'https://receiver.example.test/hooks');
    const delivery = await app.context
      .db('webhook_deliveries as w')
      .join('events as e', 'e.id', 'w.event_id')
      .where('w.id', d.deliveryId)
      .first('w.*', 'e.type', 'e.transaction_id');
    const ages = [45, 31, 29, 0];
    await app.context.db('webhook_attempts').insert(
      ages.map((days, i) => ({
        delivery_id: d.deliveryId,
        event_id: delivery.event_id,
        event: delivery.type,
        transaction_id: delivery.transaction_id,
        api_key_id: delivery.api_key_id,
        url: delivery.url,
        attempt: i + 1,
        status_code: 500,
        duration_ms: 5,
        outcome: 'retry',
        created_at: app.context.db.raw(`now() - make_interval(days => ?)`, [days]),
      })),
    );

    const job = await app.context.queues.maintenance.add(PRUNE_WEBHOOK_ATTEMPTS_JOB, {});
    const result = await eventually(async () => {
      const state = await app.context.queues.maintenance.getJob(job.id!);
      return state?.finishedOn ? state : undefined;
    }, 'the prune job');
    expect(result.failedReason).to.equal(undefined);
    expect(result.returnvalue.deleted).to.be.at.least(2);
    expect((await attemptRows(app.context, d.deliveryId)).map((a) => a.attempt)).to.deep.equal([3, 4]);
  });

  it('is scheduled hourly with the other housekeeping', async () => {
    await scheduleMaintenance(app.context);
    const scheduler = await app.context.queues.maintenance.getJobScheduler(PRUNE_WEBHOOK_ATTEMPTS_JOB);
    expect(scheduler).to.include({ name: PRUNE_WEBHOOK_ATTEMPTS_JOB, every: 3_600_000 });
  });
});
