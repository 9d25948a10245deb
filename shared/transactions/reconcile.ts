import type { AppContext } from '../context';
import { idleUnfinishedIds } from './repo';

export interface ReconcileOptions {
  /** Only transactions untouched for this long are considered stuck. */
  readonly idleSeconds: number;
  readonly limit?: number;
}

/**
 * Re-enqueues, from PostgreSQL, every confirmed transaction that is not terminal and has no live chain job:
 * its job was lost with Redis, never enqueued (Redis down at confirm), or ran out of attempts. The chain
 * pipeline is safe to run again, so a transaction that is in fact still moving is not harmed.
 */
export async function reconcileTransactions(app: AppContext, options: ReconcileOptions): Promise<string[]> {
  const stuck = await idleUnfinishedIds(app.db, options.idleSeconds, options.limit ?? 500);
  const requeued: string[] = [];
  for (const id of stuck) {
    const job = await app.queues.chain.getJob(id);
    const state = job ? await job.getState() : 'missing';
    if (state === 'active' || state === 'waiting' || state === 'delayed' || state === 'prioritized' || state === 'waiting-children') continue;
    if (job) await job.remove();
    await app.queues.chain.add('transaction', { transactionId: id }, { jobId: id });
    requeued.push(id);
  }
  if (requeued.length) app.log.warn({ transactions: requeued.length }, 'reconciler re-enqueued stuck transactions');
  return requeued;
}
