import { readFileSync } from 'node:fs';
import type { Resources } from '../../shared/resources';

// CPU time of the processes a bench drives, from /proc and from the servers' own counters.

/** The PostgreSQL backend processes serving the bench database (the workers' pools and the bench's own). */
export async function postgresBackends(app: Resources): Promise<number[]> {
  const { rows } = await app.db.raw(`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`);
  return rows.map((r: { pid: number }) => r.pid);
}

/** The Redis server's user and system CPU so far (ms), from INFO. */
export async function redisCpuMs(app: Resources): Promise<number> {
  const info = await app.redis.info('cpu');
  const read = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (read('used_cpu_user') + read('used_cpu_sys')) * 1000;
}

/**
 * CPU time of each process so far (ms), from /proc; a process that has ended is left out. A process of one thread (a
 * PostgreSQL backend) is read to the nanosecond from its schedstat (its thread's time on a core), since its stat counts
 * in clock ticks of 10 ms, more than a smoke-sized burst costs a backend on a fast core; any other process (Node's,
 * several threads, some of which may have ended) is read from its stat, user and system time in ticks.
 */
export function cpuMs(pids: readonly number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      // utime, stime and num_threads: fields 14, 15 and 20 of stat(5), counted from the state (field 3) here
      const ticksMs = ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
      out.set(pid, fields[17] === '1' ? (onCoreMs(pid) ?? ticksMs) : ticksMs);
    } catch {
      // ended
    }
  }
  return out;
}

/**
 * A field of a schedstat file (`/proc/<pid>/schedstat`, or a thread's under `task/`), in ms from its ns: 0 the time on
 * a core, 1 the time runnable but waiting for one. Throws if the process or thread is gone.
 */
export function schedstatMs(path: string, field: 0 | 1): number {
  return Number(readFileSync(path, 'utf8').split(' ')[field]) / 1e6;
}

/** A one-thread process's time on a core (ms), or undefined where the kernel keeps no schedstat. */
function onCoreMs(pid: number): number | undefined {
  try {
    const ms = schedstatMs(`/proc/${pid}/schedstat`, 0);
    return Number.isFinite(ms) ? ms : undefined;
  } catch {
    return undefined;
  }
}

/** CPU the processes spent since `before` (ms); one that appeared meanwhile (a pool that grew) counts from zero. */
export function cpuSince(before: Map<number, number>, pids: readonly number[]): number {
  let total = 0;
  for (const [pid, ms] of cpuMs(pids)) total += ms - (before.get(pid) ?? 0);
  return total;
}

const CLOCK_TICKS = 100; // USER_HZ on Linux
