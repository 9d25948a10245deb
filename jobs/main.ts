import '../shared/telemetry/register-worker';
import { loadConfigOrExit, type Config, type QueueName } from '../shared/config';
import { createLogger, type Logger } from '../shared/logger';
import { openResources } from '../shared/resources';
import { startWorkers } from './workers';
import { checkRedisAtStart } from '../shared/redis/eviction';
import { keepMaintenanceScheduled, PROCESSORS } from './registry';
import { stopTracing } from '../shared/telemetry/start';
import { serveWorkerMetrics } from './metrics-server';
import { backgroundNice, lowerPriority } from './priority';

/** How long a worker gives the chain connection at start before it reports the node unreachable. */
const NODE_GRACE_MS = 3000;

export interface RunningJobs {
  readonly queues: readonly QueueName[];
  stop(): Promise<void>;
}

/** Runs the processors of the queues named in WORKER_QUEUES (all registered ones when unset). */
export async function startJobs(config: Config, log: Logger): Promise<RunningJobs> {
  const queues = config.workers.queues.filter((q) => PROCESSORS[q]);
  // in production, not on a Redis that may drop keys (the jobs themselves, among others)
  await checkRedisAtStart(config, log.child({ process: 'worker' }));
  const context = openResources(config, log.child({ process: 'worker' }), { worker: queues });
  // first, so a METRICS_PORT already taken stops the start before any job is taken
  const metrics = await serveWorkerMetrics(context).catch(async (err: Error) => {
    await context.close();
    throw err;
  });
  const nice = backgroundNice(queues, config.workers.backgroundNice);
  if (nice !== undefined) context.log.info({ nice, threads: lowerPriority(nice) }, 'background queues only: CPU priority lowered');
  const running = startWorkers(context, queues, PROCESSORS);
  // a node away at start is waited for (the connection retries); say so once the first connection has had
  // its chance (a node merely still connecting is not reported), and say when it is reached
  for (const { network } of context.hasChains ? context.chains.networks : []) {
    const reached = context.chains.whenReady(network);
    void Promise.race([reached.then(() => true), new Promise<false>((resolve) => setTimeout(resolve, NODE_GRACE_MS, false).unref())]).then(
      (ready) => {
        if (ready) return;
        context.log.warn({ network }, `not ready: the ${network} node is unreachable; waiting for it`);
        void reached.then(
          () => context.log.info({ network }, `the ${network} node is reachable: ready`),
          () => undefined,
        );
      },
      () => undefined,
    );
  }
  const unwatch = queues.includes('maintenance') ? await keepMaintenanceScheduled(context) : undefined;
  return {
    queues,
    async stop() {
      unwatch?.();
      await metrics?.close();
      await running.stop();
      await context.close();
    },
  };
}

if (require.main === module) {
  const config = loadConfigOrExit();
  const log = createLogger(config.log.level);
  startJobs(config, log).then(
    (jobs) => {
      let stopping = false;
      const shutdown = (signal: string) => {
        if (stopping) return;
        stopping = true;
        log.info({ signal }, 'worker shutting down: finishing active jobs');
        jobs.stop().then(
          () => stopTracing().then(() => process.exit(0)),
          () => stopTracing().then(() => process.exit(1)),
        );
      };
      process.on('SIGTERM', shutdown);
      process.on('SIGINT', shutdown);
      // said once the signals are handled: a platform may send SIGTERM the instant it reads this line
      log.info({ queues: jobs.queues }, 'worker started');
    },
    (err) => {
      log.fatal({ err }, 'worker failed to start');
      process.exit(1);
    },
  );
}
