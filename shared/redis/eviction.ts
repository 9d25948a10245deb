import { Cluster, type Redis as Server } from 'ioredis';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { createRedis, type Redis } from './client';

/**
 * Whether the Redis server may drop keys of its own accord. The service keeps state there whose loss is not
 * just a cache miss: BullMQ's jobs, a revoked key's marker (a lookup in flight could then put the key's active
 * record back, api-keys/key-cache.ts), idempotency records, quotes being confirmed. Redis evicts only under
 * `maxmemory`, and then by its `maxmemory-policy`: every policy but `noeviction` drops keys (the `volatile-*`
 * ones those with a TTL, which all of those records have). BullMQ only prints a warning on the console.
 */
export interface EvictionCheck {
  /** `maxmemory-policy` as the server reports it (undefined when its INFO does not say). */
  readonly policy: string | undefined;
  /** `maxmemory` in bytes; 0 is no limit, so no eviction whatever the policy. */
  readonly maxmemory: number | undefined;
  /** True when keys may be evicted, false when they cannot, undefined when the INFO does not tell. */
  readonly evicts: boolean | undefined;
}

/** The verdict on one server's `INFO memory` text. */
export function evictionOf(info: string): EvictionCheck {
  const field = (name: string) => new RegExp(`^${name}:(.*?)\\r?$`, 'm').exec(info)?.[1]?.trim();
  const policy = field('maxmemory_policy');
  const limit = field('maxmemory');
  const maxmemory = limit !== undefined && /^\d+$/.test(limit) ? Number(limit) : undefined;
  const evicts = policy === undefined ? undefined : policy !== 'noeviction' && maxmemory !== 0;
  return { policy, maxmemory, evicts };
}

/** Each server the connection writes to (a cluster's masters), with its eviction verdict. */
export async function evictionOfServers(redis: Redis): Promise<(EvictionCheck & { readonly server: string })[]> {
  const servers: Server[] = redis instanceof Cluster ? redis.nodes('master') : [redis];
  return Promise.all(
    servers.map(async (server) => ({
      server: `${server.options.host}:${server.options.port}`,
      ...evictionOf(await server.info('memory')),
    })),
  );
}

export class RedisEvicts extends Error {
  override readonly name = 'RedisEvicts';
}

/** How long a production start waits to read Redis's eviction settings before refusing to start unchecked. */
export const EVICTION_CHECK_WAIT_MS = 10_000;

/**
 * At a process's start: in production, refuses (throws RedisEvicts) when a server may evict keys, or when its
 * settings cannot be read within `waitMs` (an unchecked start would run unprotected); elsewhere, says so in a warning and starts.
 */
export async function checkRedisKeepsKeys(
  redis: Redis,
  options: { readonly production: boolean; readonly log: Logger; readonly waitMs?: number },
): Promise<void> {
  const { production, log, waitMs = EVICTION_CHECK_WAIT_MS } = options;
  let servers: Awaited<ReturnType<typeof evictionOfServers>>;
  try {
    await whenReady(redis, waitMs);
    servers = await evictionOfServers(redis);
  } catch (err) {
    // unreachable, or INFO refused (BullMQ needs it too): a production start does not go on unchecked
    const message = `could not read Redis's eviction settings within ${waitMs} ms (${(err as Error).message})`;
    if (production) throw new RedisEvicts(`refusing to start: ${message}`);
    log.warn(message);
    return;
  }
  const evicting = servers.filter((s) => s.evicts);
  const unknown = servers.filter((s) => s.evicts === undefined);
  if (unknown.length)
    log.warn({ servers: unknown.map((s) => s.server) }, 'Redis does not report its maxmemory-policy: make sure it is noeviction');
  if (!evicting.length) return;
  const message =
    `Redis may evict keys (${evicting.map((s) => `${s.server}: maxmemory-policy ${s.policy}, maxmemory ${s.maxmemory}`).join('; ')}): ` +
    'set maxmemory-policy noeviction (or no maxmemory); jobs, revocations and idempotency records must not be dropped';
  if (production) throw new RedisEvicts(`refusing to start: ${message}`);
  log.warn(message);
}

/** Resolves once the connection is ready, rejects after `ms` (it keeps connecting meanwhile). */
function whenReady(redis: Redis, ms: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', ready);
      reject(new Error(`not ready (${redis.status})`));
    }, ms).unref();
    const ready = () => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', ready);
  });
}

/**
 * The check of a web or worker process's start, over a connection of its own (closed after): awaited in
 * production, where a refusal stops the start; in the background elsewhere, where it only warns.
 */
export function checkRedisAtStart(config: Pick<Config, 'env' | 'redis'>, log: Logger, waitMs?: number): Promise<void> {
  const production = config.env === 'production';
  const redis = createRedis(config.redis, 'worker', 'works-api:eviction-check');
  const check = checkRedisKeepsKeys(redis, { production, log, waitMs }).finally(() => redis.disconnect());
  if (production) return check;
  check.catch((err: Error) => log.warn({ err: { message: err.message } }, 'Redis eviction check failed'));
  return Promise.resolve();
}
