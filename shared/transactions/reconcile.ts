import type { Knex } from 'knex';
import type { Logger } from '../logger';
import { requeueTransaction, type Queues } from '../queue/jobs';
import { idleUnfinished } from './repo';

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
export async function reconcileTransactions(deps: { db: Knex; queues: Queues; log: Logger }, options: ReconcileOptions): Promise<string[]> {
  const requeued: string[] = [];
  for (const { traceparent, ...labels } of await idleUnfinished(deps.db, options.idleSeconds, options.limit ?? 500)) {
    if (await requeueTransaction(deps.queues, labels, traceparent)) requeued.push(labels.transactionId);
  }
  if (requeued.length) deps.log.warn({ transactions: requeued.length }, 'reconciler re-enqueued stuck transactions');
  return requeued;
}
