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

/** User and system CPU time of each process so far (ms), from /proc; a process that has ended is left out. */
export function cpuMs(pids: readonly number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      out.set(pid, ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS); // utime, stime: fields 14 and 15
    } catch {
      // ended
    }
  }
  return out;
}

/** CPU the processes spent since `before` (ms); one that appeared meanwhile (a pool that grew) counts from zero. */
export function cpuSince(before: Map<number, number>, pids: readonly number[]): number {
  let total = 0;
  for (const [pid, ms] of cpuMs(pids)) total += ms - (before.get(pid) ?? 0);
  return total;
}

const CLOCK_TICKS = 100; // USER_HZ on Linux
