import type { AppContext } from '../context';
import { enqueueDelivery } from './enqueue';

const LIVE = new Set(['active', 'waiting', 'delayed', 'prioritized', 'waiting-children']);

/**
 * Re-enqueues, from PostgreSQL, every pending delivery without a live job: its job was lost with Redis, never
 * enqueued (Redis down when the event was recorded), or ended without settling the row. It gets a fresh
 * job, recorded as the delivery's current one, so a stale job that surfaces later steps aside.
 */
export async function reconcileDeliveries(app: AppContext, options: { idleSeconds: number; limit?: number }): Promise<string[]> {
  const stuck = await app.db('webhook_deliveries')
    .where({ status: 'pending' })
    .where('updated_at', '<', app.db.raw(`now() - make_interval(secs => ?)`, [options.idleSeconds]))
    .orderBy('updated_at')
    .limit(options.limit ?? 500)
    .select('id', 'current_job_id');
  const requeued: string[] = [];
  for (const { id, current_job_id } of stuck as { id: string; current_job_id: string | null }[]) {
    const job = await app.queues.webhooks.getJob(current_job_id ?? id);
    if (job && LIVE.has(await job.getState())) continue;
    const jobId = `${id}-r-${Date.now().toString(36)}`;
    const claimed = await app.db('webhook_deliveries')
      .where({ id, status: 'pending' })
      .where((q) => (current_job_id ? q.where({ current_job_id }) : q.whereNull('current_job_id')))
      .update({ current_job_id: jobId, updated_at: app.db.fn.now() });
    if (!claimed) continue; // moved on meanwhile
    await enqueueDelivery(app.queues, app.config.webhooks, id, jobId);
    requeued.push(id);
  }
  if (requeued.length) app.log.warn({ deliveries: requeued.length }, 'reconciler re-enqueued stuck webhook deliveries');
  return requeued;
}
