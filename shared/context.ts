import type { Knex } from 'knex';
import type { Redis } from 'ioredis';
import type { Config } from './config';
import { createDb } from './db/knex';
import { createRedis } from './redis/client';
import { QueueEvents } from 'bullmq';
import { bullPrefix, createQueues, closeQueues, type Queues } from './queue/queues';
import { createStorage, type Storage } from './storage/s3';
import { ChainConnections } from './chain/connections';
import { SecretBox } from './crypto/secret-box';
import type { Logger } from './logger';

/** The long-lived handles a process needs, opened once and closed together. */
export interface AppContext {
  readonly config: Config;
  readonly log: Logger;
  readonly db: Knex;
  readonly redis: Redis;
  readonly queues: Queues;
  readonly storage: Storage;
  readonly chains: ChainConnections;
  readonly box: SecretBox;
  /** Completion events of the prepare queue, which the web waits on; opened on first use. */
  prepareEvents(): QueueEvents;
}

export function createContext(config: Config, log: Logger, profile: 'web' | 'worker'): AppContext {
  const redis = createRedis(config.redis.url, profile, `works-api:${profile}`);
  let events: QueueEvents | undefined;
  return {
    config,
    log,
    db: createDb(config.database),
    redis,
    // The web enqueues through its fail-fast connection too: a request answers 503 rather than hang.
    queues: createQueues(redis, config.redis.prefix),
    storage: createStorage(config.s3),
    chains: new ChainConnections(config.chains),
    box: new SecretBox(config.secrets.key),
    prepareEvents() {
      if (!events) {
        const connection = createRedis(config.redis.url, 'worker', 'works-api:prepare-events');
        events = new QueueEvents('prepare', { connection, prefix: bullPrefix(config.redis.prefix) });
        events.on('error', () => undefined);
        openEvents.set(this, { events, connection });
      }
      return events;
    },
  };
}

const openEvents = new WeakMap<AppContext, { events: QueueEvents; connection: Redis }>();

export async function closeContext(ctx: AppContext): Promise<void> {
  const open = openEvents.get(ctx);
  if (open) {
    await open.events.close().catch(() => undefined);
    open.connection.disconnect();
  }
  await closeQueues(ctx.queues).catch(() => undefined);
  // quit() fails when the server is gone; disconnect() also stops the reconnect timer.
  await Promise.allSettled([ctx.redis.quit().finally(() => ctx.redis.disconnect()), ctx.db.destroy(), ctx.chains.close()]);
  ctx.storage.client.destroy();
}
