import type { AppContext } from '../context';

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
  const stuck = await app.db('transactions')
    .whereIn('status', ['pending', 'submitted', 'in_block'])
    .where('updated_at', '<', app.db.raw(`now() - make_interval(secs => ?)`, [options.idleSeconds]))
    .orderBy('updated_at')
    .limit(options.limit ?? 500)
    .pluck('id');
  const requeued: string[] = [];
  for (const id of stuck as string[]) {
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
