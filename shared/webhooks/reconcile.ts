import type { Knex } from 'knex';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { enqueueDelivery, isLive, type Queues } from '../queue/jobs';
import { claimDelivery, idlePendingDeliveries, labelSource } from './repo';
import { labelsOf } from './service';

export interface ReconcileDeps {
  readonly db: Knex;
  readonly queues: Queues;
  readonly config: Pick<Config, 'webhooks'>;
  readonly log: Logger;
}

/**
 * Re-enqueues, from PostgreSQL, every pending delivery without a live job: its job was lost with Redis, never
 * enqueued (Redis down when the event was recorded), or ended without settling the row. It gets a fresh
 * job, recorded as the delivery's current one, so a stale job that surfaces later steps aside.
 */
export async function reconcileDeliveries(deps: ReconcileDeps, options: { idleSeconds: number; limit?: number }): Promise<string[]> {
  const requeued: string[] = [];
  for (const { id, currentJobId } of await idlePendingDeliveries(deps.db, options.idleSeconds, options.limit ?? 500)) {
    if (await isLive(deps.queues.webhooks, currentJobId ?? id)) continue;
    const jobId = `${id}-r-${Date.now().toString(36)}`;
    if (!(await claimDelivery(deps.db, id, currentJobId, jobId))) continue; // moved on meanwhile
    const source = await labelSource(deps.db, id);
    await enqueueDelivery(deps.queues, deps.config.webhooks.retrySchedule, id, { jobId, labels: source && labelsOf(source) });
    requeued.push(id);
  }
  if (requeued.length) deps.log.warn({ deliveries: requeued.length }, 'reconciler re-enqueued stuck webhook deliveries');
  return requeued;
}
