import type { Job, JobsOptions, Queue } from 'bullmq';
import type { QueueName } from '../config';
import { deliveryAttempts } from '../webhooks/retry-policy';
import { jobTrace, withTraceparent } from '../telemetry/tracing';
import { deliveryJobName, transactionJobName, type DeliveryLabels, type TransactionLabels } from './labels';

export type { DeliveryLabels, TransactionLabels } from './labels';

/**
 * What each queue's jobs carry: ids, never state (processors load it from PostgreSQL or the job store); chain,
 * delivery and dead-letter jobs also carry the labels support staff search Bull Board by (labels.ts), which no
 * processor reads.
 */
export interface JobData {
  readonly prepare: { readonly organizationId: string; readonly jobId: string; readonly run: number };
  readonly chain: { readonly transactionId: string } & Partial<TransactionLabels>;
  /**
   * One delivery (`retriesMade`: retries of the schedule already behind it, when it follows a batch's first
   * attempt), or the first attempts of several deliveries to one destination (webhooks/enqueue.ts).
   */
  readonly webhooks:
    | ({ readonly deliveryId: string; readonly retriesMade?: number } & Partial<DeliveryLabels>)
    | { readonly deliveryIds: readonly string[]; readonly host?: string };
  /** `parked` once its first run has put it in `failed`, where it waits for an operator's retry. */
  readonly 'webhooks-dead': { readonly deliveryId: string; readonly parked?: boolean } & Partial<DeliveryLabels>;
  /** Housekeeping jobs are told apart by name. */
  readonly maintenance: Readonly<Record<string, unknown>>;
  readonly certificates: { readonly workId: string; readonly version: number };
}

export type Queues = { readonly [N in QueueName]: Queue<JobData[N]> };
export type JobOf<N extends QueueName> = Job<JobData[N]>;

/** The states of a job that will still run (or is running): a job in any other state is finished or gone. */
export const LIVE_JOB_STATES: ReadonlySet<string> = new Set(['active', 'waiting', 'delayed', 'prioritized', 'waiting-children']);

/** Whether the queue holds a job of this id that will still run. */
export async function isLive(queue: Queue, jobId: string): Promise<boolean> {
  const job = await queue.getJob(jobId);
  return job !== undefined && LIVE_JOB_STATES.has(await job.getState());
}

// One enqueue function per job kind, with every option of that kind: nothing else calls `add`.

/**
 * A prepare run: one BullMQ job per (job, run), so a second prepare of the job while the run is under way
 * adds nothing and waits on the same job.
 */
export function enqueuePrepare(queues: Queues, data: JobData['prepare']): Promise<JobOf<'prepare'>> {
  return queues.prepare.add('prepare', data, { jobId: `prepare-${data.organizationId}-${data.jobId}-${data.run}` });
}

/**
 * A confirmed transaction's chain job (job id = transaction id: one live job per transaction), added in the
 * trace the transaction belongs to (its `traceparent`, when given; else the active one), which the job carries.
 */
export async function enqueueTransaction(queues: Queues, labels: TransactionLabels, traceparent?: string | null): Promise<void> {
  const add = () => queues.chain.add(transactionJobName(labels), labels, { jobId: labels.transactionId });
  await (traceparent === undefined ? add() : withTraceparent(traceparent, add));
}

/**
 * The transaction's chain job again, unless one will still run: a finished or failed job of the same id is
 * removed first (BullMQ ignores an `add` whose job id exists). Returns whether it was enqueued.
 */
export async function requeueTransaction(queues: Queues, labels: TransactionLabels, traceparent: string | null): Promise<boolean> {
  const job = await queues.chain.getJob(labels.transactionId);
  if (job && LIVE_JOB_STATES.has(await job.getState())) return false;
  if (job) await job.remove();
  await enqueueTransaction(queues, labels, traceparent);
  return true;
}

/**
 * A delivery job: one attempt per run, the waits computed by the `schedule` backoff (webhooks/retry-policy.ts).
 * The first job of a delivery has the delivery's id; a revived or reconciled delivery gets a new job id,
 * recorded as the delivery's current job.
 */
export function deliveryJobOptions(schedule: readonly number[], jobId: string): JobsOptions {
  return { jobId, attempts: deliveryAttempts(schedule), backoff: { type: 'schedule' } };
}

export async function enqueueDelivery(
  queues: Queues,
  schedule: readonly number[],
  deliveryId: string,
  options: { jobId?: string; labels?: DeliveryLabels } = {},
): Promise<void> {
  const { jobId = deliveryId, labels } = options;
  await queues.webhooks.add(deliveryJobName('deliver', labels), { deliveryId, ...labels }, deliveryJobOptions(schedule, jobId));
}

/**
 * Deliveries' first attempts, in one round trip: single ones as `deliver` jobs (job id = delivery id), groups as
 * one `deliver-batch` job each (its id already recorded as those deliveries' current job).
 */
export async function enqueueFirstAttempts(
  queues: Queues,
  schedule: readonly number[],
  jobs: readonly (
    | { readonly deliveryId: string; readonly traceparent?: string | null; readonly labels?: DeliveryLabels }
    | { readonly jobId: string; readonly deliveryIds: readonly string[]; readonly host?: string }
  )[],
): Promise<void> {
  if (jobs.length === 0) return;
  await queues.webhooks.addBulk(
    jobs.map((j) =>
      'deliveryId' in j
        ? {
            name: deliveryJobName('deliver', j.labels),
            data: { deliveryId: j.deliveryId, ...j.labels },
            opts: { ...deliveryJobOptions(schedule, j.deliveryId), ...jobTrace(j.traceparent) },
          }
        : // a batch job runs once: a delivery that needs another attempt gets a job of its own (the worker's)
          {
            name: deliveryJobName('deliver-batch', { host: j.host }),
            data: { deliveryIds: j.deliveryIds, ...(j.host ? { host: j.host } : {}) },
            opts: { jobId: j.jobId, attempts: 1 },
          },
    ),
  );
}

/**
 * A delivery's attempts after a batch's first one (`retriesMade` 1: the rest of the schedule), or instead of
 * it when the batch could not make it (0: the whole schedule), after `delayMs`. The job id is recorded as the
 * delivery's current job before this is called.
 */
export async function enqueueRetries(
  queues: Queues,
  schedule: readonly number[],
  deliveryId: string,
  jobId: string,
  delayMs: number,
  retriesMade: number,
  labels?: DeliveryLabels,
): Promise<void> {
  const attempts = Math.max(1, deliveryAttempts(schedule) - retriesMade);
  await queues.webhooks.add(
    deliveryJobName('deliver', labels),
    { deliveryId, retriesMade, ...labels },
    { jobId, attempts, backoff: { type: 'schedule' }, delay: delayMs },
  );
}

/** A dead letter (job id = delivery id: one per delivery), shown in Bull Board until retried. */
export async function enqueueDeadLetter(queues: Queues, deliveryId: string, labels?: DeliveryLabels): Promise<void> {
  await queues['webhooks-dead'].add(deliveryJobName('dead-delivery', labels), { deliveryId, ...labels }, { jobId: deliveryId });
}

/** Finalized versions' certificates to render (a job id per version: one asked for twice is one job), in one round trip. */
export async function enqueueCertificates(queues: Queues, versions: readonly JobData['certificates'][]): Promise<void> {
  const jobs = versions.map((data) => ({ name: 'render', data, opts: { jobId: `certificate-${data.workId}-${data.version}` } }));
  // one alone needs no bulk (a MULTI)
  if (jobs.length === 1) await queues.certificates.add(jobs[0]!.name, jobs[0]!.data, jobs[0]!.opts);
  else if (jobs.length) await queues.certificates.addBulk(jobs);
}

/** The repeatable housekeeping, one schedule per name however many workers call it. */
export async function scheduleRepeatable(queues: Queues, name: string, everyMs: number): Promise<void> {
  await queues.maintenance.upsertJobScheduler(name, { every: everyMs }, { name });
}
