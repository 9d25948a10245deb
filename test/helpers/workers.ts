import type { Config, QueueName } from '../../shared/config';
import { createContext, closeContext } from '../../shared/context';
import { startWorkers } from '../../jobs/workers';
import { PROCESSORS } from '../../jobs/registry';
import { testLogger, whenConnected } from './app';
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
