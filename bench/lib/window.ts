import os from 'node:os';
import { readFileSync, readdirSync } from 'node:fs';
import type { Resources } from '../../shared/resources';
import { cpuMs, postgresBackends, redisCpuMs, schedstatMs } from './cpu';
import type { ChainBlock } from './processes';

/**
 * CPU of every process a bench drives over a window of wall time (the pipeline's first confirm to last webhook),
 * read at its two ends: each named process from /proc, the bench database's PostgreSQL backends, the Redis
 * server (INFO), this process, and the whole machine (/proc/stat: every process, other users' included).
 */
export interface CpuSnapshot {
  readonly at: number;
  readonly parts: Record<string, number>;
  readonly postgres: Map<number, number>;
  /** Ms each part's threads have been runnable but waiting for a core (/proc/<pid>/task/<tid>/schedstat). */
  readonly waits: Record<string, number>;
  readonly postgresWaits: Map<number, number>;
  readonly machineBusyMs: number;
}

/** The chain node's part: the chopsticks chain in a process of its own. */
export const CHAIN_PART = 'chain node (chopsticks process)';

/** The part this process is counted as (the clients, the webhook receiver and s3rver: what the bench holds). */
export const BENCH_PART = 'bench process (clients, receiver, s3rver)';

/** Every part's CPU so far (ms): `pids` by name, PostgreSQL's backends, Redis, this process; the machine's busy time. */
export async function cpuSnapshot(app: Resources, pids: Record<string, number>): Promise<CpuSnapshot> {
  const backends = await postgresBackends(app);
  const redisPid = Number(/^process_id:(\d+)/m.exec(await app.redis.info('server'))?.[1]);
  const redis = await redisCpuMs(app);
  const at = Date.now();
  const own = process.cpuUsage();
  const parts: Record<string, number> = {};
  const waits: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    parts[name] = cpuMs([pid]).get(pid) ?? NaN;
    waits[name] = runQueueWaitMs(pid);
  }
  parts.redis = redis;
  waits.redis = runQueueWaitMs(redisPid);
  parts[BENCH_PART] = (own.user + own.system) / 1000;
  waits[BENCH_PART] = runQueueWaitMs(process.pid);
  const postgresWaits = new Map(backends.map((pid) => [pid, runQueueWaitMs(pid)]));
  return { at, parts, postgres: cpuMs(backends), waits, postgresWaits, machineBusyMs: machineBusyMs() };
}

export interface WindowCpu {
  readonly seconds: number;
  /** Cores × seconds: what the machine could have spent in the window. */
  readonly capacityCpuS: number;
  /** CPU-seconds each part used in the window, PostgreSQL's backends as one part. */
  readonly parts: Record<string, number>;
  /** Seconds each part's threads were runnable but waiting for a core in the window (summed over its threads). */
  readonly waits: Record<string, number>;
  /** The parts that are the service: every part but the chain node and this process. */
  readonly serviceCpuS: number;
  /** Every part counted here. */
  readonly accountedCpuS: number;
  /** Every process on the machine, from /proc/stat (other users' work included). */
  readonly machineBusyCpuS: number;
}

/** CPU-seconds per part between two snapshots; `outside` names the parts that are not the service. */
export function windowCpu(before: CpuSnapshot, after: CpuSnapshot, outside: readonly string[]): WindowCpu {
  const seconds = (after.at - before.at) / 1000;
  const parts: Record<string, number> = {};
  for (const [part, ms] of Object.entries(after.parts)) parts[part] = (ms - before.parts[part]!) / 1000;
  // a backend that connected inside the window counts from zero; one that left is lost (pools keep theirs)
  let postgres = 0;
  for (const [pid, ms] of after.postgres) postgres += ms - (before.postgres.get(pid) ?? 0);
  parts.postgres = postgres / 1000;
  const waits: Record<string, number> = {};
  for (const [part, ms] of Object.entries(after.waits)) waits[part] = (ms - before.waits[part]!) / 1000;
  let postgresWait = 0;
  for (const [pid, ms] of after.postgresWaits) if (Number.isFinite(ms)) postgresWait += ms - (before.postgresWaits.get(pid) ?? 0);
  waits.postgres = postgresWait / 1000;
  const sum = (names: string[]) => names.reduce((total, part) => total + parts[part]!, 0);
  const names = Object.keys(parts);
  return {
    seconds,
    capacityCpuS: os.cpus().length * seconds,
    parts,
    waits,
    serviceCpuS: sum(names.filter((part) => !outside.includes(part))),
    accountedCpuS: sum(names),
    machineBusyCpuS: (after.machineBusyMs - before.machineBusyMs) / 1000,
  };
}

/** A block the chain built in the window, with its interval since the block before and the registrations it carried. */
export interface WindowBlock {
  readonly number: number;
  readonly intervalMs: number;
  readonly buildMs: number;
  /** The chain process's CPU from the block before's end to this one's (ms): building it and serving RPC meanwhile. */
  readonly chainCpuMs: number;
  readonly registrations: number;
  /** For each relayer extrinsic it carried: ms from its signing (its row stored) to this block's building began. */
  readonly signedBeforeMs: number[];
  /** Registrations in extrinsics signed before the block before this one began building: they missed a block. */
  readonly missedBlock: number;
}

/** What the registrations put in one block: how many, and each relayer extrinsic's signing time and size. */
export interface Carried {
  readonly registrations: number;
  readonly extrinsics: { readonly signedAt: number; readonly registrations: number }[];
}

/**
 * The blocks built between `from` and `to` (Date.now()), and every block that carried a registration of the run
 * whatever the clocks say (the chain process reports a block when its event loop gets to it, and the bench
 * reads the window's ends when its own does: under load either can lag a block built at the window's edge),
 * each with the registrations `carried` put in it.
 */
export function windowBlocks(blocks: readonly ChainBlock[], from: number, to: number, carried: Map<number, Carried>): WindowBlock[] {
  const out: WindowBlock[] = [];
  blocks.forEach((block, i) => {
    if (!carried.has(block.number) && (block.builtAt < from || block.builtAt > to)) return;
    const previous = blocks[i - 1];
    const extrinsics = carried.get(block.number)?.extrinsics ?? [];
    out.push({
      number: block.number,
      intervalMs: previous ? block.builtAt - previous.builtAt : NaN,
      buildMs: block.builtAt - block.startedAt,
      chainCpuMs: previous ? block.cpuMs - previous.cpuMs : NaN,
      registrations: carried.get(block.number)?.registrations ?? 0,
      signedBeforeMs: extrinsics.map((e) => block.startedAt - e.signedAt),
      missedBlock: previous ? extrinsics.filter((e) => e.signedAt < previous.startedAt).reduce((n, e) => n + e.registrations, 0) : 0,
    });
  });
  return out;
}

/** Ms every core of the machine has been busy since boot (user, nice, system, irq, softirq, steal). */
function machineBusyMs(): number {
  const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return ((user! + nice! + system! + irq! + softirq! + steal!) * 1000) / 100; // USER_HZ
}

/** Ms the process's threads have spent runnable but waiting for a core (schedstat's second field, ns); NaN if gone. */
function runQueueWaitMs(pid: number): number {
  try {
    let total = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        total += schedstatMs(`/proc/${pid}/task/${tid}/schedstat`, 1);
      } catch {
        // the thread ended
      }
    }
    return total;
  } catch {
    return NaN;
  }
}
