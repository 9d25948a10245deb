import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Resources } from '../../shared/resources';
import { recordEvent } from '../../shared/webhooks/service';
import { enqueueDelivery, type DeliveryLabels } from '../../shared/queue/jobs';
import { createKey, createOrg, type TestKey } from './factories';
import { eventually } from './app';

export interface TestDelivery {
  readonly deliveryId: string;
  readonly transactionId: string;
  readonly organizationId: string;
  readonly key: TestKey;
  /** What its jobs are labelled with, as the pipeline labels them. */
  readonly labels: DeliveryLabels;
}

/**
 * A work_failed event for a transaction of a new organization, recorded as the pipeline records one (same
 * service, same SQL transaction), with its delivery to `url` enqueued. No chain involved.
 */
export async function deliverEvent(ctx: Resources, url: string): Promise<TestDelivery> {
  const recorded = await recordDelivery(ctx, url);
  await enqueueDelivery(ctx.queues, ctx.config.webhooks.retrySchedule, recorded.deliveryId, { labels: recorded.labels });
  return recorded;
}

/** The same event and delivery as deliverEvent, recorded but not enqueued. */
export async function recordDelivery(ctx: Resources, url: string): Promise<TestDelivery> {
  const organizationId = await createOrg(ctx, 0);
  const key = await createKey(ctx, organizationId, ['works:register'], url);
  const transactionId = randomUUID();
  const delivery = await ctx.db.transaction(async (trx) => {
    await insertEndedTransaction(trx, { id: transactionId, organizationId, apiKeyId: key.id, status: 'failed' });
    return recordEvent(trx, ctx.box, {
      transactionId,
      organizationId,
      apiKeyId: key.id,
      traceparent: null,
      confirmedAt: new Date(),
      type: 'work_failed',
      payload: {
        event: 'work_failed',
        transaction_id: transactionId,
        organization_id: organizationId,
        api_key_id: key.id,
        external_user_ref: null,
        network: 'testnet',
        ats_id: null,
        reason: 'chain.rejected',
        message: 'a test failure',
        failed_at: new Date().toISOString(),
      },
    });
  });
  if (!delivery) throw new Error('the key has no webhook URL');
  return { deliveryId: delivery.id, transactionId, organizationId, key, labels: delivery.labels };
}

/** The delivery's row once it reaches `status` (PostgreSQL polled, bounded). */
export function deliveryReaches(ctx: Resources, deliveryId: string, status: 'pending' | 'delivered' | 'dead', timeoutMs?: number) {
  return eventually(
    async () => {
      const row = await ctx.db('webhook_deliveries').where({ id: deliveryId }).first();
      return row?.status === status ? row : undefined;
    },
    `delivery ${deliveryId} to be ${status}`,
    timeoutMs,
  );
}

export function attemptRows(ctx: Resources, deliveryId: string) {
  return ctx.db('webhook_attempts').where({ delivery_id: deliveryId }).orderBy('attempt');
}

/** A registration's transaction row that has ended (`failed` or `finalized`), without the rest of the pipeline. */
export async function insertEndedTransaction(
  trx: Knex.Transaction,
  t: { id: string; organizationId: string; apiKeyId: string; status: 'failed' | 'finalized' },
): Promise<void> {
  await trx('transactions').insert({
    id: t.id,
    organization_id: t.organizationId,
    api_key_id: t.apiKeyId,
    network: 'testnet',
    type: 'register',
    status: t.status,
    current_step: t.status === 'failed' ? 'failed' : 'completed',
    steps: JSON.stringify([]),
    anchor: JSON.stringify({}),
    price_credits: 0,
  });
}
