import type { Knex } from 'knex';
import type { Config } from '../config';
import { enqueueDelivery, type Queues } from '../queue/jobs';
import { deadDeliveries, labelSource, markDeadAgain, reviveDead, type DeadDeliveryRow } from './repo';
import { labelsOf } from './service';

export interface DeadLetterDeps {
  readonly db: Knex;
  readonly queues: Queues;
  readonly webhooks: Config['webhooks'];
}

/** A dead delivery as the CLI prints it. */
export type DeadDelivery = Omit<DeadDeliveryRow, 'updated_at'> & { readonly updated_at: string };

/** Deliveries that ran out of attempts or met a permanent refusal, newest first. */
export async function listDeadDeliveries(db: Knex): Promise<DeadDelivery[]> {
  return (await deadDeliveries(db)).map((r) => ({ ...r, updated_at: r.updated_at.toISOString() }));
}

/** A one-line account of why a dead delivery died, for the dead-letter job's failure reason. */
export async function deadReason(db: Knex, deliveryId: string): Promise<string | null> {
  const [row] = await deadDeliveries(db, deliveryId);
  if (!row) return null;
  const cause = [row.last_status_code ? `HTTP ${row.last_status_code}` : undefined, row.last_error].filter(Boolean).join(': ');
  return `${row.event} of transaction ${row.transaction_id} dead after ${row.attempts} attempt(s): ${cause || 'unknown'}`;
}

/**
 * Sends a dead delivery again: back to pending under a fresh job with the full retry schedule, which becomes
 * the delivery's current job. Its attempts sign afresh and are recorded as further attempts of the same
 * delivery (same delivery id). The dead letter is removed unless the caller is that job itself. Returns the
 * new job id, or null when the delivery was not dead (already retried, delivered or unknown).
 */
export async function reviveDeadDelivery(
  deps: DeadLetterDeps,
  deliveryId: string,
  options: { keepDeadLetter?: boolean } = {},
): Promise<string | null> {
  const jobId = `${deliveryId}-retry-${Date.now().toString(36)}`;
  if (!(await reviveDead(deps.db, deliveryId, jobId))) return null;
  try {
    const source = await labelSource(deps.db, deliveryId);
    await enqueueDelivery(deps.queues, deps.webhooks.retrySchedule, deliveryId, { jobId, labels: source && labelsOf(source) });
  } catch (err) {
    await markDeadAgain(deps.db, deliveryId, jobId);
    throw err;
  }
  // A dead letter being processed right now is locked and stays; its run finds the delivery no longer dead.
  if (!options.keepDeadLetter) await deps.queues['webhooks-dead'].remove(deliveryId).catch(() => 0);
  return jobId;
}

/** The CLI's `webhooks retry`: one dead delivery, or all of them. Returns how many were sent again. */
export async function retryDeadDeliveries(deps: DeadLetterDeps, which: { deliveryId: string } | 'all-dead'): Promise<number> {
  const dead = await deadDeliveries(deps.db, which === 'all-dead' ? undefined : which.deliveryId);
  let retried = 0;
  for (const { id } of dead) if (await reviveDeadDelivery(deps, id)) retried += 1;
  return retried;
}
