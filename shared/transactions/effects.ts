import type { JobData, Queues } from '../queue/jobs';
import { enqueueCertificates } from '../queue/jobs';
import { enqueueCommitted, type NewDelivery } from '../webhooks/enqueue';
import type { Config } from '../config';
import { publishTransactionRows, publishTransactionUpdates, type UpdateDeps } from './updates';
import type { TransactionRow } from './row';
import type { EventMetrics, Settlement } from '../metrics/events';

/**
 * What a committed change to transactions sets off, gathered inside the SQL transaction and carried out once
 * it has committed: webhook deliveries to enqueue, live updates to publish, certificates to render, and the
 * transactions that reached their end, to count.
 */
export interface Effects {
  /** Webhook deliveries recorded, each with the trace of its transaction (its job joins it). */
  readonly deliveries: readonly NewDelivery[];
  readonly published: readonly string[];
  /** Rows read or written in a terminal state, published as they are: nothing changes a transaction once it has ended. */
  readonly publishedRows: readonly TransactionRow[];
  readonly certificates: readonly JobData['certificates'][];
  readonly settled: readonly Settlement[];
}

export const NO_EFFECTS: Effects = { deliveries: [], published: [], publishedRows: [], certificates: [], settled: [] };

export function effects(part: Partial<Effects>): Effects {
  return { ...NO_EFFECTS, ...part };
}

export function mergeEffects(all: readonly Effects[]): Effects {
  return {
    deliveries: all.flatMap((e) => e.deliveries),
    published: all.flatMap((e) => e.published),
    publishedRows: all.flatMap((e) => e.publishedRows),
    certificates: all.flatMap((e) => e.certificates),
    settled: all.flatMap((e) => e.settled),
  };
}

export interface EffectDeps extends UpdateDeps {
  readonly queues: Queues;
  readonly config: Pick<Config, 'redis' | 'webhooks'>;
  readonly metrics: EventMetrics;
}

/**
 * Carries out committed effects (the deliveries of several outcomes to one URL, committed together or while an
 * enqueue was under way, share their first attempts' job: webhooks/enqueue.ts). A delivery that cannot be enqueued throws (the reconciler would find it, but
 * the caller's job is better retried now); a publish or a certificate only logs: the change is durable, a
 * lost frame costs a live client one update, and a missing certificate is rendered on first download.
 */
export async function afterCommit(deps: EffectDeps, done: Effects): Promise<void> {
  for (const settlement of done.settled) deps.metrics.settled(settlement);
  try {
    await enqueueCommitted(deps, done.deliveries);
  } finally {
    // carried out even when the deliveries could not be enqueued: a job retried then finds its transaction ended and
    // stops there, so its live update and certificate would otherwise be lost (neither throws: each only logs)
    await publishTransactionUpdates(deps, done.published);
    await publishTransactionRows(deps, done.publishedRows);
    await enqueueCertificates(deps.queues, done.certificates).catch((err: Error) =>
      deps.log.warn(
        { err: { message: err.message }, certificates: done.certificates.map(({ workId, version }) => `${workId}@${version}`) },
        'certificates not enqueued; each will be rendered on first download',
      ),
    );
  }
}
