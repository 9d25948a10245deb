import type { Job, Processor, Queue, Worker } from 'bullmq';
import type { Logger } from '../shared/logger';

/**
 * BullMQ's worker can stay wedged after Redis went away under it (seen here when a cluster shard died and came
 * back empty; upstream issues #3088, #3185, #4378): `isRunning()` is true, no command is in flight, and jobs
 * stay waiting for ever, with no error. Nothing reports it, so each worker is watched from outside: when jobs
 * have waited through two checks in a row (a period apart) and the worker, with room for them, started none
 * in between, it is replaced.
 */
export interface Progress {
  /** Jobs the processor has started, and those it runs now (counted around the processor itself, so a job
   * whose keys vanished under it, which BullMQ then reports only as an `error`, still stops counting). */
  started: number;
  running: number;
}

/** `processor`, counting its jobs into `progress`. */
export function counted<T>(processor: Processor<T>, progress: Progress): Processor<T> {
  return async (job: Job<T>, token?: string, signal?: AbortSignal) => {
    progress.started++;
    progress.running++;
    try {
      return await processor(job, token, signal);
    } finally {
      progress.running--;
    }
  };
}

export interface Watched {
  readonly worker: Worker;
  readonly progress: Progress;
  readonly concurrency: number;
}

/**
 * Watches one queue's worker (`current()`, which changes once replaced) every `periodMs`, calling `replace`
 * when it is wedged. Returns the function that stops watching.
 */
export function watchWorkers(queue: Queue, current: () => Watched, replace: () => void, periodMs: number, log: Logger): () => void {
  let suspect: { worker: Worker; started: number } | undefined;
  let checking = false;
  const check = async () => {
    const { worker, progress, concurrency } = current();
    if (worker.isPaused() || worker.closing) return void (suspect = undefined);
    const waiting = (await queue.getWaitingCount()) + (await queue.getPrioritizedCount());
    if (waiting === 0 || (await queue.isPaused())) return void (suspect = undefined);
    if (progress.running >= concurrency) {
      log.debug({ waiting, running: progress.running }, 'worker watch: jobs wait while the worker is full');
      return void (suspect = undefined);
    }
    if (suspect?.worker === worker && suspect.started === progress.started) {
      log.warn({ waiting, running: progress.running }, 'worker started no job while jobs waited and it had room: replaced');
      suspect = undefined;
      replace();
      return;
    }
    suspect = { worker, started: progress.started };
  };
  const timer = setInterval(() => {
    if (checking) return;
    checking = true;
    check()
      .catch(() => undefined) // Redis away: nothing to judge by; the next check tries again
      .finally(() => (checking = false));
  }, periodMs).unref();
  return () => clearInterval(timer);
}
