import os from 'node:os';
import { readdirSync } from 'node:fs';
import type { QueueName } from '../shared/config';
import { QUEUE_DEFINITIONS } from '../shared/queue/queues';

/**
 * The nice value a worker process takes for `queues`: `nice` when every one of them is a background queue
 * (QueueDefinition.background: certificates), else none (undefined). A process that also runs a queue somebody
 * waits on keeps its priority.
 */
export function backgroundNice(queues: readonly QueueName[], nice: number): number | undefined {
  if (nice <= 0 || !queues.length || !queues.every((q) => QUEUE_DEFINITIONS[q].background)) return undefined;
  return nice;
}

/**
 * Lowers this process's CPU priority to `nice`, every thread of it: on Linux a nice value is a thread's, and
 * setpriority on the process id reaches only the main thread, not the garbage collector's and libuv's threads
 * already running (threads started later inherit it). Elsewhere, the process's. Returns how many threads are
 * now at `nice` or lower (none is raised: that needs privileges).
 * A process lowers it once, at start.
 */
export function lowerPriority(nice: number): number {
  let threads: number[];
  try {
    threads = readdirSync('/proc/self/task').map(Number);
  } catch {
    threads = [process.pid];
  }
  let lowered = 0;
  for (const tid of threads) {
    try {
      if (os.getPriority(tid) < nice) os.setPriority(tid, nice);
      lowered++;
    } catch {
      // a thread that ended meanwhile
    }
  }
  return lowered;
}
