import type { Knex } from 'knex';
import type { Redis } from 'ioredis';
import type { Config } from './config';
import { createDb } from './db/knex';
import { createRedis } from './redis/client';
import { createQueues, closeQueues, type Queues } from './queue/queues';
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
}

export function createContext(config: Config, log: Logger, profile: 'web' | 'worker'): AppContext {
  const redis = createRedis(config.redis.url, profile, `works-api:${profile}`);
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
  };
}

export async function closeContext(ctx: AppContext): Promise<void> {
  await closeQueues(ctx.queues).catch(() => undefined);
  await Promise.allSettled([ctx.redis.quit(), ctx.db.destroy(), ctx.chains.close()]);
  ctx.storage.client.destroy();
}
