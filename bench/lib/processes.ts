import path from 'node:path';
import { mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { fork } from 'node:child_process';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { Config, Env, QueueName } from '../../shared/config';
import { bullPrefix } from '../../shared/redis/settings';
import type { BuiltBlock } from '../../shared/dev/embedded/chain';
import { spawnWorker } from '../../test/helpers/workers';
import { reply } from './ipc';

export type WebMemory = NodeJS.MemoryUsage & { sockets: number };

export interface WebProcess {
  readonly url: string;
  readonly pid: number;
  /** Memory after three full collections, and the live sockets the web holds. */
  measure(): Promise<WebMemory>;
  stop(): Promise<void>;
}

/**
 * Node flags that write CPU profiles of the process into `dir/name` when it exits (one file per thread: the
 * largest is the main thread's).
 */
const cpuProfileFlags = (dir: string | undefined, name: string): string[] =>
  dir ? ['--cpu-prof', `--cpu-prof-dir=${path.join(dir, name)}`] : [];

/**
 * `--perf`: Node flags with which V8 writes its compiled code's moves as they happen (`jit-<pid>.dump` in the working
 * directory), so that a `perf record -k mono -g` of the run, after `perf inject --jit`, names compiled JavaScript in
 * its call stacks. Unlike `--cpu-prof`, whose samples count a thread's waits for a core, `perf`'s `cpu-clock`
 * samples count only CPU (docs/performance.md, section 39 and Reproduce).
 */
export const perfFlags = (perf: boolean | undefined): string[] =>
  perf ? ['--perf-prof', '--interpreted-frames-native-stack', '--no-write-protect-code-memory'] : [];

/**
 * Where a process's log lines (its stdout) go: `dir/name.log`, appended to, or nowhere without a directory. The
 * benches run the service at LOG_LEVEL=warn; with a directory its processes log at info, as production does, so that
 * a run that goes wrong can be read afterwards (writing them is then part of what is measured).
 */
function logFile(dir: string | undefined, name: string): number | 'ignore' {
  if (!dir) return 'ignore';
  mkdirSync(dir, { recursive: true });
  return openSync(path.join(dir, `${name}.log`), 'a');
}

/** What the service's processes of a bench run are started with (the bench's `--profile` and `--logs`). */
export interface ProcessOptions {
  readonly profileDir?: string;
  readonly logDir?: string;
  readonly perf?: boolean;
}

/** The profiling flags a service process named `name` is started with: `--profile`'s and `--perf`'s. */
const profilingFlags = (options: ProcessOptions, name: string): string[] => [
  ...cpuProfileFlags(options.profileDir, name),
  ...perfFlags(options.perf),
];

const logLevel = (options: ProcessOptions): Env => (options.logDir ? { LOG_LEVEL: 'info' } : {});

/** A web process of its own (web-process.ts), so its CPU and memory are the web's alone. */
export async function startWebProcess(env: Env, options: ProcessOptions = {}): Promise<WebProcess> {
  const child = fork(path.join(__dirname, 'web-process.ts'), [], {
    execArgv: ['--expose-gc', '--import', 'tsx', ...profilingFlags(options, 'web')],
    env: { PATH: process.env.PATH, ...env, ...logLevel(options), PORT: '0', HOST: '127.0.0.1' },
    stdio: ['ignore', logFile(options.logDir, 'web'), 'inherit', 'ipc'],
  });
  const { url } = await reply<{ url: string }>(child, 'listening', 'web');
  return {
    url,
    pid: child.pid!,
    async measure() {
      const answer = reply<{ memory: WebMemory }>(child, 'memory', 'web');
      child.send({ type: 'measure' });
      return (await answer).memory;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ type: 'stop' });
      await exited;
    },
  };
}

/** A block the chain process built: when its building began and ended, and the process's CPU (ms) when built. */
export interface ChainBlock extends BuiltBlock {
  readonly cpuMs: number;
}

export interface ChainProcess {
  readonly wsUrl: string;
  readonly pid: number;
  /** Every block built so far, once the chain process has recorded block `through` (a block the service already saw). */
  blocks(through?: number): Promise<ChainBlock[]>;
  stop(): Promise<void>;
}

/**
 * A chopsticks chain in a process of its own (chain-process.ts), a block every `blocks` ms or one per extrinsic,
 * with `endow` funded: its CPU is the chain node's alone, apart from the bench's clients and receiver.
 */
export async function startChainProcess(blocks: 'instant' | number, endow: string): Promise<ChainProcess> {
  const child = fork(path.join(__dirname, 'chain-process.ts'), [String(blocks), endow], {
    execArgv: ['--import', 'tsx'],
    env: { PATH: process.env.PATH },
    // chopsticks logs at warn and above here (LOG_LEVEL), to stdout: a block whose building failed, and with it
    // the pool it took, is said only there (docs/performance.md, section 37)
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const { wsUrl } = await reply<{ wsUrl: string }>(child, 'ready', 'chain');
  return {
    wsUrl,
    pid: child.pid!,
    async blocks(through) {
      const answer = reply<{ blocks: ChainBlock[] }>(child, 'blocks', 'chain');
      child.send({ type: 'blocks', through });
      return (await answer).blocks;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ type: 'stop' });
      await exited;
    },
  };
}

export interface WorkerProcess {
  readonly pid: number;
  /** Resident set size now, bytes. */
  rss(): number;
  /** Resets the kernel's peak-RSS mark (VmHWM) to the current RSS. */
  resetPeak(): void;
  /** Peak resident set size since the last reset, bytes. */
  peak(): number;
  stop(): Promise<void>;
}

/**
 * A `worker` process as the Procfile runs it (the test harness's spawnWorker), for the named queues; resolves
 * once each queue has the process's worker connected. Its memory is read from /proc.
 */
export async function startWorkerProcess(
  env: Env,
  config: Config,
  queues: QueueName[],
  options: ProcessOptions = {},
): Promise<WorkerProcess> {
  const name = queues.length > 1 ? 'worker' : `worker-${queues[0]}`;
  const log = logFile(options.logDir, name);
  const worker = spawnWorker(
    { ...env, ...logLevel(options), WORKER_QUEUES: queues.join(',') },
    profilingFlags(options, name),
    log === 'ignore' ? undefined : log,
  );
  await waitForWorkers(config, queues, () => worker.exited);
  const status = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${worker.pid}/status`, 'utf8'))?.[1] ?? NaN) * 1024;
  return {
    pid: worker.pid,
    rss: () => status('VmRSS'),
    resetPeak: () => writeFileSync(`/proc/${worker.pid}/clear_refs`, '5'),
    peak: () => status('VmHWM'),
    async stop() {
      worker.kill('SIGTERM');
      await worker.exited;
    },
  };
}

/** Waits until every named queue has a worker connected (BullMQ's worker list), or the process ends. */
export async function waitForWorkers(
  config: Config,
  queues: QueueName[],
  exited: () => Promise<unknown>,
  timeoutMs = 60_000,
): Promise<void> {
  const connection = new Redis(config.redis.url, { maxRetriesPerRequest: null });
  const handles = queues.map((name) => new Queue(name, { connection, prefix: bullPrefix(config.redis, name) }));
  let ended = false;
  void exited().then(() => (ended = true));
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const counts = await Promise.all(handles.map((q) => q.getWorkersCount()));
      if (counts.every((c) => c > 0)) return;
      if (ended) throw new Error(`the worker process for ${queues.join(', ')} exited`);
      if (Date.now() > deadline) throw new Error(`no worker for ${queues.join(', ')} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await Promise.all(handles.map((q) => q.close()));
    connection.disconnect();
  }
}
