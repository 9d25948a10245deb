import type { Knex } from 'knex';
import type { Config } from '../config';
import type { Queues } from '../queue/queues';
import { enqueueDelivery } from './enqueue';

export interface DeadLetterDeps {
  readonly db: Knex;
  readonly queues: Queues;
  readonly webhooks: Config['webhooks'];
}

export interface DeadDelivery {
  readonly id: string;
  readonly event: string;
  readonly transaction_id: string;
  readonly url: string;
  readonly attempts: number;
  readonly last_status_code: number | null;
  readonly last_error: string | null;
  readonly updated_at: string;
}

/** Deliveries that ran out of attempts or met a permanent refusal, newest first. */
export async function listDeadDeliveries(db: Knex): Promise<DeadDelivery[]> {
  const rows = await db('webhook_deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .where('d.status', 'dead')
    .orderBy('d.updated_at', 'desc')
    .select('d.id', 'e.type as event', 'e.transaction_id', 'd.url', 'd.attempts', 'd.last_status_code', 'd.last_error', 'd.updated_at');
  return rows.map((r) => ({ ...r, updated_at: (r.updated_at as Date).toISOString() }));
}

/** A one-line account of why a dead delivery died, for the dead-letter job's failure reason. */
export async function deadReason(db: Knex, deliveryId: string): Promise<string | null> {
  const row = await db('webhook_deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .where({ 'd.id': deliveryId, 'd.status': 'dead' })
    .first('e.type', 'e.transaction_id', 'd.attempts', 'd.last_status_code', 'd.last_error');
  if (!row) return null;
  const cause = [row.last_status_code ? `HTTP ${row.last_status_code}` : undefined, row.last_error].filter(Boolean).join(': ');
  return `${row.type} of transaction ${row.transaction_id} dead after ${row.attempts} attempt(s): ${cause || 'unknown'}`;
}

/** Puts a dead delivery in the dead-letter queue (job id = delivery id; adding it twice is a no-op). */
export async function addDeadLetter(queues: Queues, deliveryId: string): Promise<void> {
  await queues['webhooks-dead'].add('dead-delivery', { deliveryId }, { jobId: deliveryId });
}

/**
 * Sends a dead delivery again: back to pending under a fresh job with the full retry schedule, which becomes
 * the delivery's current job. Its attempts sign afresh and are recorded as further attempts of the same
 * delivery (same delivery id). The dead letter is removed unless the caller is that job itself. Returns the
 * new job id, or null when the delivery was not dead (already retried, delivered or unknown).
 */
export async function reviveDeadDelivery(deps: DeadLetterDeps, deliveryId: string, options: { keepDeadLetter?: boolean } = {}): Promise<string | null> {
  const jobId = `${deliveryId}-retry-${Date.now().toString(36)}`;
  const revived = await deps.db('webhook_deliveries')
    .where({ id: deliveryId, status: 'dead' })
    .update({ status: 'pending', current_job_id: jobId, next_attempt_at: null, updated_at: deps.db.fn.now() })
    .returning('id');
  if (revived.length === 0) return null;
  try {
    await enqueueDelivery(deps.queues, deps.webhooks, deliveryId, jobId);
  } catch (err) {
    await deps.db('webhook_deliveries').where({ id: deliveryId, current_job_id: jobId }).update({ status: 'dead', updated_at: deps.db.fn.now() });
    throw err;
  }
  // A dead letter being processed right now is locked and stays; its run finds the delivery no longer dead.
  if (!options.keepDeadLetter) await deps.queues['webhooks-dead'].remove(deliveryId).catch(() => 0);
  return jobId;
}

/** The CLI's `webhooks retry`: one dead delivery, or all of them. Returns how many were sent again. */
export async function retryDeadDeliveries(deps: DeadLetterDeps, which: { deliveryId: string } | 'all-dead'): Promise<number> {
  const query = deps.db('webhook_deliveries').where({ status: 'dead' });
  if (which !== 'all-dead') query.where({ id: which.deliveryId });
  const ids = (await query.pluck('id')) as string[];
  let retried = 0;
  for (const id of ids) if (await reviveDeadDelivery(deps, id)) retried += 1;
  return retried;
}
