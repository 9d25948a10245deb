import path from 'node:path';
import { spawn } from 'node:child_process';
import type { Config, Env, QueueName } from '../../shared/config';
import { openResources } from '../../shared/resources';
import { startWorkers } from '../../jobs/workers';
import { PROCESSORS } from '../../jobs/registry';
import { serveWorkerMetrics } from '../../jobs/metrics-server';
import { startApp, testLogger, whenConnected } from './app';
import { configWith, testServices } from './services';

export interface TestWorkers {
  /** Their `/metrics` server's base URL, when the configuration sets METRICS_PORT (as a `worker` process serves it). */
  readonly metricsUrl?: string;
  stop(): Promise<void>;
}

/** Real BullMQ workers in this process, with their own connections, like a `worker` process. */
export async function startTestWorkers(
  config: Config = testServices().config,
  queues: QueueName[] = ['prepare', 'chain', 'webhooks'],
): Promise<TestWorkers> {
  const context = openResources(config, testLogger(), 'dev');
  await whenConnected(context);
  const running = startWorkers(context, queues, PROCESSORS);
  await Promise.all(running.workers.map((w) => w.waitUntilReady()));
  const metrics = await serveWorkerMetrics(context);
  return {
    metricsUrl: metrics?.url,
    async stop() {
      await metrics?.close();
      await running.stop(5000);
      await context.close();
    },
  };
}

export interface TestStack {
  readonly app: import('./app').TestApp;
  readonly workers: TestWorkers;
  readonly config: Config;
}

export interface StackOptions {
  /** Variables that differ from the run's configuration (a Redis prefix of the block's own, say). */
  readonly env?: Env;
  readonly queues?: QueueName[];
}

/** Registers before/after hooks that run a web app and workers for the enclosing describe block. */
export function useStack(options: StackOptions = {}): TestStack {
  const stack = {} as { app: import('./app').TestApp; workers: TestWorkers; config: Config };
  before(async () => {
    stack.config = options.env ? configWith(options.env) : testServices().config;
    stack.app = await startApp(stack.config);
    stack.workers = await startTestWorkers(stack.config, options.queues);
  });
  after(async () => {
    await stack.workers.stop();
    await stack.app.close();
  });
  return stack;
}

export interface WorkerProcess {
  readonly pid: number;
  /** Resolves when the process has ended, with how. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal?: NodeJS.Signals): void;
}

/**
 * A `worker` process as the Procfile runs it (`node --import tsx jobs/main.ts`), on the given environment;
 * `nodeArgs` adds Node flags (the benches' --cpu-prof, which NODE_OPTIONS does not take).
 */
export function spawnWorker(env: Env, nodeArgs: string[] = [], logFd?: number): WorkerProcess {
  const root = path.resolve(__dirname, '../..');
  // its log lines (stdout) go to `logFd` when given
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'jobs/main.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', logFd ?? 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  void exited.then(({ code }) => {
    if (code) process.stderr.write(`worker process exited ${code}: ${stderr}\n`);
  });
  return { pid: child.pid!, exited, kill: (signal = 'SIGTERM') => void child.kill(signal) };
}
