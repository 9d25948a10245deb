import type { Job, Queue, Worker } from 'bullmq';
import type { Logger } from '../shared/logger';

/**
 * BullMQ's worker can stay wedged after Redis went away under it (seen here when a cluster shard died and came
 * back empty; upstream issues #3088, #3185, #4378): `isRunning()` is true, no command is in flight, and jobs
 * stay waiting for ever, with no error. Nothing reports it, so each worker is watched from outside: when jobs
 * have waited through two checks in a row (`periodMs` apart) and the worker, with room for them, started none
 * in between, it is replaced.
 */
export interface Watched {
  readonly worker: Worker;
  /** Starts of jobs seen on this worker, and the jobs it runs now. */
  readonly progress: { started: number; readonly running: Set<string> };
  readonly concurrency: number;
}

/** Counts what the worker starts and runs, for `isWedged`. */
export function watched(worker: Worker, concurrency: number): Watched {
  const progress = { started: 0, running: new Set<string>() };
  worker.on('active', (job: Job) => {
    progress.started++;
    progress.running.add(job.id!);
  });
  // a job failed by the stalled-job check was never running here: only ids seen starting are let go of
  const done = (job: Job | undefined) => job?.id && progress.running.delete(job.id);
  worker.on('completed', done);
  worker.on('failed', done);
  return { worker, progress, concurrency };
}

/**
 * Watches one queue's worker (`current()`, which changes once replaced) every `periodMs`, calling `replace` when
 * it is wedged.
 * Returns the function that stops watching.
 */
export function watchWorkers(queue: Queue, current: () => Watched, replace: () => void, periodMs: number, log: Logger): () => void {
  let suspect: { started: number } | undefined;
  let checking = false;
  const check = async () => {
    const { worker, progress, concurrency } = current();
    if (worker.isPaused() || worker.closing) return void (suspect = undefined);
    const waiting = (await queue.getWaitingCount()) + (await queue.getPrioritizedCount());
    if (waiting === 0 || (await queue.isPaused())) return void (suspect = undefined);
    if (progress.running.size >= concurrency) {
      log.debug({ waiting, running: progress.running.size }, 'worker watch: jobs wait while the worker is full');
      return void (suspect = undefined);
    }
    if (suspect && suspect.started === progress.started) {
      log.warn({ waiting, running: progress.running.size }, 'worker started no job while jobs waited and it had room: replaced');
      suspect = undefined;
      replace();
      return;
    }
    suspect = { started: progress.started };
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
