import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Config } from '../config';
import { enqueueDelivery, enqueueFirstAttempts, type Queues } from '../queue/jobs';
import { claimUnclaimed, unclaimedDestinations } from './repo';
import { inTraceOf } from '../telemetry/tracing';
import { Coalescer } from '../coalesce';
import { webhookHost, type DeliveryLabels } from '../queue/labels';

export interface EnqueueDeps {
  readonly db: Knex;
  readonly queues: Queues;
  readonly config: Pick<Config, 'webhooks'>;
}

/** A delivery just recorded, the trace of its transaction (null when untraced), and its jobs' labels. */
export interface NewDelivery {
  readonly id: string;
  readonly traceparent: string | null;
  readonly labels?: DeliveryLabels;
}

/** Deliveries to one destination whose first attempts share a job, at most. */
export const DELIVERY_BATCH = 16;

/** Each process's enqueues under way, by its queues: what commits meanwhile goes in the next. */
const underWay = new WeakMap<Queues, Coalescer<readonly NewDelivery[], undefined>>();

/**
 * `enqueueDeliveries` for the deliveries of one commit, with those of the commits that end while an enqueue of
 * this process is under way (batch-while-busy, coalesce.ts). Each chain job finalizes its own transaction, so a
 * block's outcomes, final together, are committed one by one: together, those to one URL share a
 * `deliver-batch` job. A commit's deliveries while none is under way go at once, as before.
 */
export async function enqueueCommitted(deps: EnqueueDeps, deliveries: readonly NewDelivery[]): Promise<void> {
  if (!deliveries.length) return;
  let coalescer = underWay.get(deps.queues);
  if (!coalescer) {
    const run = async (commits: (readonly NewDelivery[])[]) => {
      await enqueueDeliveries(deps, commits.flat());
      return commits.map(() => undefined);
    };
    underWay.set(deps.queues, (coalescer = new Coalescer(run, { maxBatch: 64, maxInFlight: 1 })));
  }
  await coalescer.submit(deliveries);
}

/**
 * Enqueues newly recorded deliveries. One is its own job, as ever. When several come at once (a block's
 * outcomes), those to the same URL go up to DELIVERY_BATCH to a `deliver-batch` job, recorded first as their
 * current job: the worker then moves one job, not one per delivery, through Redis for their first attempts.
 * Each delivery keeps its own attempt rows, retry schedule (a retry gets a job of its own) and dead letter.
 */
export async function enqueueDeliveries(deps: EnqueueDeps, deliveries: readonly NewDelivery[]): Promise<void> {
  const schedule = deps.config.webhooks.retrySchedule;
  // a delivery's job is added in its transaction's trace (a failure's is recorded in a relayer round, in none)
  if (deliveries.length <= 1) {
    for (const { id, traceparent, labels } of deliveries)
      await inTraceOf(traceparent, () => enqueueDelivery(deps.queues, schedule, id, { labels }));
    return;
  }
  const deliveryIds = deliveries.map((d) => d.id);
  const byId = new Map(deliveries.map((d) => [d.id, d]));
  const byUrl = new Map<string, string[]>();
  // in the order given (the rows come back in whatever order PostgreSQL's plan reads them)
  const urlOf = new Map((await unclaimedDestinations(deps.db, deliveryIds)).map((row) => [row.id, row.url] as const));
  for (const id of deliveryIds) {
    const url = urlOf.get(id);
    if (url === undefined) continue;
    const ids = byUrl.get(url);
    if (ids) ids.push(id);
    else byUrl.set(url, [id]);
  }
  const groups = [...byUrl.values()].flatMap((ids) =>
    Array.from({ length: Math.ceil(ids.length / DELIVERY_BATCH) }, (_, i) => ids.slice(i * DELIVERY_BATCH, (i + 1) * DELIVERY_BATCH)),
  );
  const hostOf = new Map([...byUrl].flatMap(([url, ids]) => ids.map((id) => [id, webhookHost(url)] as const)));
  const batches = groups
    .filter((ids) => ids.length > 1)
    .map((ids) => ({ jobId: `batch-${randomUUID()}`, deliveryIds: ids, host: hostOf.get(ids[0]!) }));
  const claimed = await claimUnclaimed(
    deps.db,
    batches.flatMap((b) => b.deliveryIds.map((id) => ({ id, jobId: b.jobId }))),
  );
  // anything not claimed for a batch (alone to its URL, claimed meanwhile, or not pending) gets the job it always
  // had: its run decides
  const singles = deliveryIds
    .filter((id) => !claimed.has(id))
    .map((deliveryId) => ({ deliveryId, traceparent: byId.get(deliveryId)?.traceparent, labels: byId.get(deliveryId)?.labels }));
  const kept = batches
    .map((b) => ({ ...b, deliveryIds: b.deliveryIds.filter((id) => claimed.has(id)) }))
    .filter((b) => b.deliveryIds.length > 0);
  await enqueueFirstAttempts(deps.queues, schedule, [...kept, ...singles]);
}
