import { expect } from 'chai';
import { QueueEvents } from 'bullmq';
import type { TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers, useStack, type TestStack } from '../helpers/workers';
import { register } from '../helpers/registration';
import { reconcileTransactions } from '../../shared/transactions/reconcile';
import { bullPrefix } from '../../shared/redis/settings';
import { reconcileDeliveries } from '../../shared/webhooks/reconcile';
import { WebhookReceiver, verifySignature } from '../helpers/receiver';
import { deliverEvent, deliveryReaches } from '../helpers/deliveries';
import { createRedis } from '../../shared/redis/client';

describe('reconciler', function () {
  this.timeout(120_000);
  // a Redis prefix of its own and no chain worker: confirmed transactions wait for the test
  const stack = useStack({ env: { REDIS_PREFIX: `reconcile_${Date.now()}` }, queues: ['prepare'] });
  let app: TestApp;
  let config: TestStack['config'];
  before(() => ({ app, config } = stack));

  it('re-enqueues a confirmed transaction whose job was lost, which then finalizes exactly once', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const r = await register(app.url, key.token);
    const txId = r.confirm.body.transaction_id as string;
    // Redis loses the job before any chain worker ran it
    await (await app.context.queues.chain.getJob(txId))!.remove();
    expect(await app.context.queues.chain.getJob(txId)).to.equal(undefined);

    // The database is shared with the other test files, whose unfinished transactions (their chain jobs live
    // under other Redis prefixes) this reconciler may take too: only this test's transaction is judged.
    // not yet idle long enough: left alone
    expect(await reconcileTransactions(app.context, { idleSeconds: 3600 })).to.not.include(txId);
    await app.context
      .db('transactions')
      .where({ id: txId })
      .update({ updated_at: app.context.db.raw(`now() - interval '1 hour'`) });
    expect(await reconcileTransactions(app.context, { idleSeconds: 60 })).to.include(txId);
    // a job is waiting now: a second pass does not add another
    expect(await reconcileTransactions(app.context, { idleSeconds: 60 })).to.not.include(txId);

    const events = new QueueEvents('chain', {
      connection: createRedis(config.redis, 'worker', 'reconcile-test-events'),
      prefix: bullPrefix(config.redis, 'chain'),
    });
    await events.waitUntilReady();
    const chain = await startTestWorkers(config, ['chain']);
    try {
      await (await app.context.queues.chain.getJob(txId))!.waitUntilFinished(events, 60_000);
    } finally {
      await chain.stop();
      await events.close();
    }
    const tx = await app.context.db('transactions').where({ id: txId }).first();
    expect(tx.status).to.equal('finalized');
    expect(await app.context.db('works').where({ organization_id: org }).count<{ count: string }[]>('* as count')).to.deep.equal([
      { count: '1' },
    ]);
    const debits = await app.context.db('credit_ledger').where({ organization_id: org, reference: txId });
    expect(debits.map((d) => d.kind)).to.deep.equal(['debit']);
    // finalized transactions are never picked up again
    await app.context
      .db('transactions')
      .where({ id: txId })
      .update({ updated_at: app.context.db.raw(`now() - interval '1 hour'`) });
    expect(await reconcileTransactions(app.context, { idleSeconds: 60 })).to.not.include(txId);
  });

  it('re-enqueues a pending webhook delivery whose job was lost, which then arrives once, signed', async () => {
    const receiver = await new WebhookReceiver().start();
    try {
      const { deliveryId, key } = await deliverEvent(app.context, receiver.url);
      // Redis loses the job before any webhooks worker ran it
      await (await app.context.queues.webhooks.getJob(deliveryId))!.remove();
      // (other tests' deliveries may be reconciled too: each assertion is about this test's own)
      expect(await reconcileDeliveries(app.context, { idleSeconds: 3600 })).to.not.include(deliveryId); // not idle long enough
      await app.context
        .db('webhook_deliveries')
        .where({ id: deliveryId })
        .update({ updated_at: app.context.db.raw(`now() - interval '1 hour'`) });
      expect(await reconcileDeliveries(app.context, { idleSeconds: 60 })).to.include(deliveryId);
      expect(await reconcileDeliveries(app.context, { idleSeconds: 0 })).to.not.include(deliveryId); // its new job is live
      const webhooks = await startTestWorkers(config, ['webhooks']);
      try {
        const [hook] = await receiver.waitFor(1);
        expect(hook!.headers['x-service-delivery']).to.equal(deliveryId);
        expect(verifySignature(key.webhookSecret, hook!)).to.equal(true);
        await deliveryReaches(app.context, deliveryId, 'delivered');
      } finally {
        await webhooks.stop();
      }
      expect(receiver.received).to.have.length(1);
      expect(await reconcileDeliveries(app.context, { idleSeconds: 0 })).to.not.include(deliveryId); // delivered: left alone
    } finally {
      await receiver.stop();
    }
  });
});
