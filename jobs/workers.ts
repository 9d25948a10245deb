import { Queue, Worker, type Processor } from 'bullmq';
import type { QueueName } from '../shared/config';
import type { Resources } from '../shared/resources';
import type { JobData } from '../shared/queue/jobs';
import { QUEUE_DEFINITIONS } from '../shared/queue/queues';
import { bullPrefix } from '../shared/redis/settings';
import { createRedis, type Redis } from '../shared/redis/client';
import { deliveryStallAllowance, scheduleBackoff } from '../shared/webhooks/retry-policy';
import { counted, watchWorkers, type Watched } from './watchdog';
import { bullTelemetry } from '../shared/telemetry/tracing';

/** A queue's processor, and what to wait for on shutdown besides its jobs (work it carries on outside them). */
export interface QueueProcessor<Data> {
  readonly process: Processor<Data>;
  settle(): Promise<void>;
}
export type ProcessorFactory<N extends QueueName> = (ctx: Resources) => Processor<JobData[N]> | QueueProcessor<JobData[N]>;
export type ProcessorRegistry = { readonly [N in QueueName]?: ProcessorFactory<N> };

export interface RunningWorkers {
  readonly workers: readonly Worker[];
  /** Finishes active jobs (up to `graceMs`), then releases whatever is still running for another worker. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Delivery jobs held per POST in flight: a job spends part of its run loading its delivery, recording its
 * attempt and moving on in Redis; with twice the jobs, those of one half do that while the other half POST
 * (the POSTs themselves stay at WEBHOOK_CONCURRENCY, connections.ts), and the statements batch more of them.
 */
const DELIVERY_JOBS_PER_POST = 2;

/**
 * Jobs in flight per worker process: deliveries mostly wait on partners' endpoints (WEBHOOK_CONCURRENCY); chain
 * and prepare jobs mostly wait on the chain (their queue's own figure); the rest are capped by WORKER_CONCURRENCY.
 */
function concurrencyOf(ctx: Resources, name: QueueName): number {
  const { concurrency, waits } = QUEUE_DEFINITIONS[name];
  if (name === 'webhooks') return ctx.config.webhooks.concurrency * DELIVERY_JOBS_PER_POST;
  return waits ? concurrency : Math.min(concurrency, ctx.config.workers.concurrency * 4);
}

/** A queue's stall allowance (queues.ts); the webhooks' follows the retry schedule's steps. */
export function maxStalledCountOf(ctx: Resources, name: QueueName): number {
  const count = QUEUE_DEFINITIONS[name].maxStalledCount;
  return count === 'schedule' ? deliveryStallAllowance(ctx.config.webhooks.retrySchedule) : count;
}

/**
 * Starts one BullMQ worker per named queue, each with its own blocking connection, each watched: a worker
 * wedged after Redis went away under it is replaced by a new one (watchdog.ts), checked every `WORKER_WATCHDOG_MS`.
 */
export function startWorkers(ctx: Resources, queues: readonly QueueName[], registry: ProcessorRegistry): RunningWorkers {
  // one connection for every queue's watch (counts and pause flags), apart from the workers' own
  const probe = createRedis(ctx.config.redis, 'worker', 'works-api:worker:watch');
  const settlers: (() => Promise<void>)[] = [];
  const retiring = new Map<Promise<void>, Redis>();
  const unwatch: (() => void)[] = [];
  const probes: Queue[] = [];
  const start = (name: QueueName, processor: Processor): Watched & { connection: Redis } => {
    const connection = createRedis(ctx.config.redis, 'worker', `works-api:worker:${name}`);
    const concurrency = concurrencyOf(ctx, name);
    const progress = { started: 0, running: 0 };
    const worker = new Worker(name, counted(processor, progress), {
      connection,
      prefix: bullPrefix(ctx.config.redis, name),
      concurrency,
      autorun: true,
      // a dead worker's job is found stalled and run again by another within about a lock period
      lockDuration: ctx.config.workers.lockMs,
      stalledInterval: ctx.config.workers.lockMs,
      // a job whose worker died (or stalled past its lock) is run again, as often as its queue says
      maxStalledCount: maxStalledCountOf(ctx, name),
      settings: { backoffStrategy: scheduleBackoff(ctx.config.webhooks.retrySchedule) },
      // when tracing is on, a job's run continues the trace it was added in
      telemetry: bullTelemetry(),
    });
    const log = ctx.log.child({ queue: name });
    worker.on('failed', (job, err) =>
      log.warn({ job_id: job?.id, attempt: job?.attemptsMade, err: { message: err.message, name: err.name } }, 'job failed'),
    );
    worker.on('error', (err) => log.error({ err: { message: err.message } }, 'worker error'));
    return { worker, progress, concurrency, connection };
  };
  /** A replaced worker finishes the jobs it runs (its connection still answers), closes, and lets go of its connection. */
  const retire = ({ worker, connection }: { worker: Worker; connection: Redis }) => {
    const closed = worker.close().catch(() => undefined);
    // a wedged worker may never close: its connection goes after the longest a job of it could still hold its lock
    const bounded = Promise.race([closed, new Promise<void>((resolve) => setTimeout(resolve, ctx.config.workers.lockMs * 2).unref())]);
    const done: Promise<void> = bounded.then(() => {
      connection.disconnect();
      retiring.delete(done);
    });
    retiring.set(done, connection);
  };
  const running = queues.map((name) => {
    const factory = registry[name];
    if (!factory) throw new Error(`no processor is registered for queue "${name}"`);
    // each queue's processor takes its own JobData; the worker of that queue only ever hands it that
    const made = factory(ctx) as Processor | QueueProcessor<unknown>;
    if (typeof made !== 'function') settlers.push(() => made.settle());
    const processor = typeof made === 'function' ? made : made.process;
    const slot = { current: start(name, processor) };
    const queue = new Queue(name, { connection: probe, prefix: bullPrefix(ctx.config.redis, name) });
    queue.on('error', () => undefined);
    probes.push(queue);
    const replace = () => {
      retire(slot.current);
      slot.current = start(name, processor);
    };
    unwatch.push(watchWorkers(queue, () => slot.current, replace, ctx.config.workers.watchdogMs, ctx.log.child({ queue: name })));
    return slot;
  });
  return {
    get workers() {
      return running.map((slot) => slot.current.worker);
    },
    async stop(graceMs = 25_000) {
      for (const stopWatching of unwatch) stopWatching();
      const current = running.map((slot) => slot.current);
      let timer: NodeJS.Timeout | undefined;
      // pause() stops taking jobs and waits for the active ones; close() is then immediate. Past the grace
      // period, close(true) lets go: the job's lock lapses and BullMQ's stalled-job check hands it to another
      // worker. Replaced workers, still finishing their jobs, get the same grace.
      const drained = Promise.all([...current.map(({ worker }) => worker.pause()), ...retiring.keys()]).then(() =>
        Promise.all(settlers.map((settle) => settle())),
      );
      const expired = new Promise<'expired'>((resolve) => (timer = setTimeout(() => resolve('expired'), graceMs)));
      const outcome = await Promise.race([drained, expired]);
      clearTimeout(timer);
      await Promise.all(current.map(({ worker }) => worker.close(outcome === 'expired')));
      await Promise.all(probes.map((q) => q.close().catch(() => undefined)));
      await Promise.all(
        [probe, ...current.map(({ connection }) => connection)].map((c) =>
          c
            .quit()
            .catch(() => undefined)
            .finally(() => c.disconnect()),
        ),
      );
      // a replaced worker still running past the grace lets go too
      for (const connection of retiring.values()) connection.disconnect();
    },
  };
}
