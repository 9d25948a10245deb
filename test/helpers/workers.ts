import type { Config, QueueName } from '../../shared/config';
import { createContext, closeContext } from '../../shared/context';
import { startWorkers } from '../../jobs/workers';
import { PROCESSORS } from '../../jobs/registry';
import { startApp, testLogger, whenConnected } from './app';
import { testServices } from './services';

export interface TestWorkers {
  stop(): Promise<void>;
}

/** Real BullMQ workers in this process, with their own connections, like a `worker` process. */
export async function startTestWorkers(config: Config = testServices().config, queues: QueueName[] = ['prepare', 'chain', 'webhooks']): Promise<TestWorkers> {
  const context = createContext(config, testLogger(), 'worker');
  await whenConnected(context);
  const running = startWorkers(context, queues, PROCESSORS);
  await Promise.all(running.workers.map((w) => w.waitUntilReady()));
  return {
    async stop() {
      await running.stop(5000);
      await closeContext(context);
    },
  };
}

export interface TestStack {
  readonly app: import('./app').TestApp;
  readonly workers: TestWorkers;
}

/** Registers before/after hooks that run a web app and workers for the enclosing describe block. */
export function useStack(): TestStack {
  const stack = {} as { app: import('./app').TestApp; workers: TestWorkers };
  before(async () => {
    stack.app = await startApp();
    stack.workers = await startTestWorkers();
  });
  after(async () => {
    await stack.workers.stop();
    await stack.app.close();
  });
  return stack;
}
