import type { Knex } from 'knex';
import type { Config } from '../config';
import type { Queues } from '../queue/queues';

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

/**
 * Sends dead deliveries again: each goes back to pending and gets a fresh job with the full retry schedule.
 * Every attempt signs afresh and is recorded as a further attempt of the same delivery (same delivery id).
 */
export async function retryDeadDeliveries(
  deps: { db: Knex; queues: Queues; webhooks: Config['webhooks'] },
  which: { deliveryId: string } | 'all-dead',
): Promise<number> {
  const query = deps.db('webhook_deliveries').where({ status: 'dead' });
  if (which !== 'all-dead') query.where({ id: which.deliveryId });
  const ids = (await query.clone().update({ status: 'pending', updated_at: deps.db.fn.now() }).returning('id')).map((r: { id: string }) => r.id);
  const attempts = deps.webhooks.retrySchedule.length + 1;
  for (const id of ids) {
    await deps.queues.webhooks.add('deliver', { deliveryId: id }, { jobId: `${id}:retry:${Date.now()}`, attempts, backoff: { type: 'schedule' } });
  }
  return ids.length;
}
