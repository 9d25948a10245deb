import { Cluster, ReplyError, type Redis as Server } from 'ioredis';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { createRedis, type Redis } from './client';
import { withTimeout } from '../timeout';

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

/** What is wrong, for the service, with these servers' settings: nothing when each is known to keep its keys. */
export function evictionProblems(servers: readonly ServerCheck[]): string[] {
  const problems: string[] = [];
  const evicting = servers.filter((s) => s.evicts === true);
  const unknown = servers.filter((s) => s.evicts === undefined);
  if (evicting.length)
    problems.push(
      `Redis may evict keys (${evicting.map((s) => `${s.server}: maxmemory-policy ${s.policy}, maxmemory ${s.maxmemory}`).join('; ')})`,
    );
  if (unknown.length) problems.push(`Redis does not report its maxmemory-policy (${unknown.map((s) => s.server).join(', ')})`);
  if (!servers.length) problems.push('Redis named no server to ask for its maxmemory-policy');
  return problems;
}

/** The problems, told with what the service needs instead. */
export const evictionMessage = (problems: readonly string[]): string =>
  `${problems.join('; ')}: the service needs maxmemory-policy noeviction (or no maxmemory), as jobs, revocations and idempotency records must not be dropped`;

type ServerCheck = EvictionCheck & { readonly server: string };

/** The servers the connection writes to: a cluster's masters, or the one server. */
const serversOf = (redis: Redis): Server[] => (redis instanceof Cluster ? redis.nodes('master') : [redis]);

const nameOf = (server: Server): string => `${server.options.host}:${server.options.port}`;

async function readServer(server: Server): Promise<ServerCheck> {
  return { server: nameOf(server), ...evictionOf(await server.info('memory')) };
}

/** Each server the connection writes to (a cluster's masters), with its eviction verdict; fails at the first that fails. */
export function evictionOfServers(redis: Redis): Promise<ServerCheck[]> {
  return Promise.all(serversOf(redis).map(readServer));
}

/**
 * A running web's question (its `/readyz`): the message saying why Redis may drop keys, or undefined when every server
 * that answered keeps them. A master that could not be asked (its connection gone or timed out: one failing over) is
 * left out while others answer, since whether it is up is not this question and a failover should not take every web
 * out of rotation for it; a server that answered with an error (`INFO` refused) counts, as does none answering.
 */
export async function evictionNow(redis: Redis): Promise<string | undefined> {
  const servers = serversOf(redis);
  const read = await Promise.all(servers.map((server) => readServer(server).catch((error: Error) => ({ server: nameOf(server), error }))));
  const answered = read.filter((r): r is ServerCheck => !('error' in r));
  const failed = read.filter((r): r is { server: string; error: Error } => 'error' in r);
  // with some server answering, one that was away is left out; one that refused is not
  const unread = answered.length ? failed.filter((r) => r.error instanceof ReplyError) : failed;
  const problems = [
    ...(answered.length || !servers.length ? evictionProblems(answered) : []),
    ...(unread.length
      ? [`could not read Redis's eviction settings: ${unread.map((r) => `${r.server}: ${r.error.message}`).join('; ')}`]
      : []),
  ];
  return problems.length ? evictionMessage(problems) : undefined;
}

export class RedisEvicts extends Error {
  override readonly name = 'RedisEvicts';
}

/** How long a production start gives reading Redis's eviction settings (connecting included) before it refuses. */
export const EVICTION_CHECK_WAIT_MS = 10_000;

/**
 * At a process's start: in production, refuses (throws RedisEvicts) when a server may evict keys, when one does not
 * say whether it may, or when the settings cannot be read within `waitMs` (an unchecked start would run unprotected);
 * elsewhere, says so in a warning and starts.
 */
export async function checkRedisKeepsKeys(
  redis: Redis,
  options: { readonly production: boolean; readonly log: Logger; readonly waitMs?: number },
): Promise<void> {
  const { production, log, waitMs = EVICTION_CHECK_WAIT_MS } = options;
  const problems: string[] = [];
  try {
    const servers = await withTimeout(
      whenReady(redis).then(() => evictionOfServers(redis)),
      waitMs,
      () => `no answer within ${waitMs} ms (the connection ${redis.status})`,
    );
    problems.push(...evictionProblems(servers));
  } catch (err) {
    // unreachable, or INFO refused (BullMQ needs it too)
    problems.push(`could not read Redis's eviction settings: ${(err as Error).message}`);
  }
  if (!problems.length) return;
  const message = evictionMessage(problems);
  if (production) throw new RedisEvicts(`refusing to start: ${message}`);
  log.warn(message);
}

/** Resolves once the connection is ready (it keeps connecting meanwhile). */
function whenReady(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => redis.once('ready', () => resolve()));
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
