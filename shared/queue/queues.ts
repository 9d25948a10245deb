import { Queue, type JobsOptions, type ConnectionOptions } from 'bullmq';
import type { Redis } from '../redis/client';
import { bullPrefix, type RedisSettings } from '../redis/settings';
import type { QueueName } from '../config';
import type { Queues } from './jobs';
import { bullTelemetry } from '../telemetry/tracing';

export type { Queues } from './jobs';

export interface QueueDefinition {
  /** What the queue's jobs do, shown in Bull Board. */
  readonly description: string;
  readonly defaultJobOptions: JobsOptions;
  /** Parallel jobs per worker process. */
  readonly concurrency: number;
  /**
   * How often a job may be found stalled (its worker died, or lost its lock) and run again before BullMQ
   * fails it. Every processor is safe to rerun at any point, so this is as often as a job may be retried;
   * `'schedule'`: as many as the webhook retry schedule has steps (a job's attempt count is 1).
   */
  readonly maxStalledCount: number | 'schedule';
  /**
   * The jobs mostly wait on the chain (answers, blocks, finality) and hold no CPU meanwhile: their concurrency
   * is not capped by WORKER_CONCURRENCY.
   */
  readonly waits?: boolean;
  /**
   * Nobody waits on its jobs: a worker process that runs only background queues lowers its CPU priority
   * (`WORKER_BACKGROUND_NICE`, jobs/priority.ts), so that on a machine it shares it takes the cores the
   * waited-on paths (confirm → webhook) leave idle instead of competing with them.
   */
  readonly background?: boolean;
}

const keep = { removeOnComplete: { age: 24 * 3600, count: 10_000 }, removeOnFail: { age: 30 * 24 * 3600 } };

/**
 * Every queue and its retry policy. Job data carries ids (and support staff's labels, queue/labels.ts);
 * processors load state from PostgreSQL.
 */
export const QUEUE_DEFINITIONS: Readonly<Record<QueueName, QueueDefinition>> = {
  prepare: {
    description: 'Hash uploaded audio, compute the commitment, dry-run and price a quote',
    // The web waits on the result; a failed prepare is answered, not retried behind the caller's back.
    defaultJobOptions: { attempts: 1, ...keep, removeOnComplete: { age: 3600, count: 1000 } },
    // hashing streams (memory stays flat); the quotes of concurrent prepares go to the chain together
    concurrency: 64,
    maxStalledCount: 2, // the web waits at most PREPARE_TIMEOUT_MS; one rerun after a stall still answers it
    waits: true,
  },
  chain: {
    description:
      'Sign, submit, follow to finality and index confirmed transactions (job id = transaction id; named with its type, network, org: and tx:)',
    defaultJobOptions: { attempts: 20, backoff: { type: 'exponential', delay: 2000 }, ...keep },
    // a job waits for its call's block and finality, holding its slot meanwhile (a few blocks): with 256 a burst
    // of 1,000 confirms waited in cohorts, 14 s at p95 before a job even started (npm run bench -- pipeline)
    concurrency: 1024,
    maxStalledCount: 20,
    waits: true,
  },
  webhooks: {
    description:
      'Deliver signed events to partner webhook URLs: deliver (one delivery), deliver-batch (first attempts of deliveries to one URL, each outcome in its result)',
    defaultJobOptions: { attempts: 1, ...keep },
    concurrency: 32,
    maxStalledCount: 'schedule',
  },
  'webhooks-dead': {
    description:
      'Dead-lettered webhook deliveries (job id = delivery id; named with the event, org:, tx: and host:): retry one to deliver it again with the full schedule',
    // A dead letter waits in `failed` until retried; the retry re-enqueues the delivery and leaves this queue.
    defaultJobOptions: { attempts: 1, removeOnComplete: true, removeOnFail: { age: 30 * 24 * 3600 } },
    concurrency: 4,
    maxStalledCount: 3,
  },
  maintenance: {
    description: 'Repeatable housekeeping: reconciling unfinished work, pruning old records',
    defaultJobOptions: { attempts: 3, backoff: { type: 'exponential', delay: 5000 }, ...keep },
    concurrency: 1,
    maxStalledCount: 3,
  },
  certificates: {
    description: 'Render the PDF certificate of each finalized version and store it in S3 (job id certificate-<work>-<version>)',
    // rendering is CPU work: a few at a time; a version missing its certificate is also rendered on download
    defaultJobOptions: { attempts: 5, backoff: { type: 'exponential', delay: 5000 }, ...keep },
    concurrency: 2,
    maxStalledCount: 5,
    background: true,
  },
};

/** Producer handles for every queue, sharing one connection. */
export function createQueues(connection: Redis | ConnectionOptions, redis: RedisSettings): Queues {
  const entries = (Object.keys(QUEUE_DEFINITIONS) as QueueName[]).map((name) => {
    const queue = new Queue(name, {
      connection,
      prefix: bullPrefix(redis, name),
      defaultJobOptions: QUEUE_DEFINITIONS[name].defaultJobOptions,
      // when tracing is on, a job carries the trace context it was added in (BullMQ's telemetry metadata)
      telemetry: bullTelemetry(),
    });
    queue.on('error', () => undefined);
    // every caller waiting on a job (the web's prepares) listens for the queue closing until its job ends
    queue.setMaxListeners(0);
    return [name, queue] as const;
  });
  return Object.freeze(Object.fromEntries(entries)) as unknown as Queues;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((q) => q.close()));
}
