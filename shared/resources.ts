import type { Knex } from 'knex';
import { QueueEvents } from 'bullmq';
import type { Config, QueueName } from './config';
import type { Logger } from './logger';
import { createDb } from './db/knex';
import { createRedis, type Redis } from './redis/client';
import { createQueues, closeQueues, type Queues } from './queue/queues';
import { bullPrefix } from './redis/settings';
import type { Storage } from './storage/s3';
import type { ChainConnections } from './chain/connections';
import { SecretBox } from './crypto/secret-box';
import { EventMetrics } from './metrics/events';

/**
 * The process roles: each opens only the resources it uses. `dev` opens everything, for tools that play every
 * part in one process (tests, benchmarks); `npm run dev` itself starts a web and a worker, each with its role.
 * The operator CLI opens, per command, the one or two handles that command uses.
 */
export type Role = 'web' | { readonly worker: readonly QueueName[] } | 'dev';

type Handle = 'db' | 'redis' | 'queues' | 'storage' | 'chains' | 'box' | 'prepareEvents';

/**
 * What each role uses. The web hashes nothing and signs nothing: its chain connection serves `/readyz` alone.
 * A worker opens the union of its queues' needs (`redis` for the job store and live updates; BullMQ's own
 * blocking connections are the workers').
 */
const WEB: readonly Handle[] = ['db', 'redis', 'queues', 'storage', 'chains', 'box', 'prepareEvents'];
const QUEUE_NEEDS: Readonly<Record<QueueName, readonly Handle[]>> = {
  prepare: ['db', 'redis', 'storage', 'chains', 'box'],
  chain: ['db', 'redis', 'queues', 'chains', 'box'],
  webhooks: ['db', 'redis', 'queues', 'box'],
  'webhooks-dead': ['db', 'redis', 'queues'],
  maintenance: ['db', 'redis', 'queues', 'storage'],
  certificates: ['db', 'storage'],
};

export function handlesOf(role: Role): ReadonlySet<Handle> {
  if (role === 'web') return new Set(WEB);
  if (role === 'dev') return new Set([...WEB, ...Object.values(QUEUE_NEEDS).flat()]);
  return new Set(role.worker.flatMap((queue) => QUEUE_NEEDS[queue]));
}

const roleName = (role: Role) => (typeof role === 'string' ? role : `worker of ${role.worker.join(',') || 'no queue'}`);

/**
 * The long-lived handles of one process, opened for its role and closed together. Services never see this
 * type: each declares the handles it uses (`XxxDeps`), which a `Resources` satisfies. A handle the role did
 * not open throws on use, naming the role, so a missing need shows at once rather than as a socket nobody
 * expected. (Opened handles are plain properties, so `{ ...resources, config }` makes a variant.)
 */
export interface Resources {
  readonly role: Role;
  readonly config: Config;
  readonly log: Logger;
  readonly db: Knex;
  readonly redis: Redis;
  readonly queues: Queues;
  readonly storage: Storage;
  readonly chains: ChainConnections;
  readonly box: SecretBox;
  /** What this process counts as it happens (a worker serves it on METRICS_PORT: jobs/metrics-server.ts). */
  readonly metrics: EventMetrics;
  /** Whether this role opened the chain connections (a worker without chain queues did not). */
  readonly hasChains: boolean;
  /** Completion events of the prepare queue, which the web waits on; opened on first use. */
  prepareEvents(): QueueEvents;
  close(): Promise<void>;
}

type Handles = { -readonly [K in 'db' | 'redis' | 'queues' | 'storage' | 'chains' | 'box']: Resources[K] };

export function openResources(config: Config, log: Logger, role: Role): Resources {
  const needs = handlesOf(role);
  const name = roleName(role);
  const opened: Partial<Handles> = {};
  // a web's statements end within WEB_STATEMENT_TIMEOUT_MS (its request answers 503); a worker's and the tools' run to their end
  if (needs.has('db')) opened.db = createDb(config.database, log, role === 'web' ? config.database.webStatementTimeoutMs : undefined);
  // the web fails fast when Redis is away (a request answers 503 rather than hang); others wait and retry
  if (needs.has('redis')) opened.redis = createRedis(config.redis, role === 'web' ? 'web' : 'worker', `works-api:${name}`);
  // producers have a connection of their own, of the same kind (the web enqueues fail-fast too) but without
  // auto-pipelining: BullMQ defines dozens of scripts on it, which every pipeline of that connection copies
  const producers = needs.has('queues')
    ? createRedis(config.redis, role === 'web' ? 'web' : 'worker', `works-api:${name}:queues`, { enableAutoPipelining: false })
    : undefined;
  if (producers) opened.queues = createQueues(producers, config.redis);
  // The S3 client and the chain's (@aws-sdk, @polkadot/api: half a worker's heap and of its start) are loaded by a
  // role that opens them, not by a webhooks worker (docs/performance.md, section 47).
  /* eslint-disable @typescript-eslint/no-require-imports -- loaded on demand */
  if (needs.has('storage')) opened.storage = (require('./storage/s3') as typeof import('./storage/s3')).createStorage(config.s3);
  if (needs.has('chains'))
    opened.chains = new (require('./chain/connections') as typeof import('./chain/connections')).ChainConnections(config.chains);
  /* eslint-enable @typescript-eslint/no-require-imports */
  if (needs.has('box')) opened.box = new SecretBox(config.secrets.key);

  let events: { events: QueueEvents; connection: Redis } | undefined;
  const resources = {
    role,
    config,
    log,
    ...opened,
    metrics: new EventMetrics(config.chains.map((c) => c.network)),
    hasChains: opened.chains !== undefined,
    prepareEvents(): QueueEvents {
      if (!needs.has('prepareEvents')) throw new Error(`the ${name} did not open prepareEvents`);
      if (!events) {
        const connection = createRedis(config.redis, 'worker', 'works-api:prepare-events');
        events = { events: new QueueEvents('prepare', { connection, prefix: bullPrefix(config.redis, 'prepare') }), connection };
        events.events.on('error', () => undefined);
      }
      return events.events;
    },
    async close(): Promise<void> {
      const { db, redis, queues, storage, chains } = opened;
      if (events) {
        await events.events.close().catch(() => undefined);
        events.connection.disconnect();
      }
      if (queues) await closeQueues(queues).catch(() => undefined);
      // quit() fails when the server is gone; disconnect() also stops the reconnect timer.
      const quit = (connection: Redis | undefined) => connection?.quit().finally(() => connection.disconnect());
      await Promise.allSettled([quit(redis), quit(producers), db?.destroy(), chains?.close()]);
      storage?.client.destroy();
    },
  };
  for (const handle of ['db', 'redis', 'queues', 'storage', 'chains', 'box'] as const) {
    if (opened[handle] === undefined) {
      Object.defineProperty(resources, handle, {
        enumerable: false,
        get: () => {
          throw new Error(`the ${name} did not open ${handle} (shared/resources.ts)`);
        },
      });
    }
  }
  return resources as Resources;
}
