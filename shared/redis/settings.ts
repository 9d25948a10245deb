import type { EnvReader } from '../env-reader';

/** One node of a Redis Cluster to start discovery from. */
export interface ClusterSeed {
  readonly host: string;
  readonly port: number;
}

export interface RedisSettings {
  /** The single server's URL; empty on a cluster. */
  readonly url: string;
  /**
   * What the service's own keys start with: `REDIS_PREFIX`, or on a cluster `{REDIS_PREFIX}`, a hash tag that
   * puts them all in one slot, so a script or MULTI over several of them (the key check, init's job and the
   * uploads set) never crosses slots.
   */
  readonly prefix: string;
  /** `REDIS_PREFIX` as given. */
  readonly name: string;
  /** Set when `REDIS_CLUSTER_NODES` is: every connection is an ioredis `Cluster` seeded from these nodes. */
  readonly cluster?: {
    readonly seeds: readonly ClusterSeed[];
    readonly tls: boolean;
    readonly username: string | undefined;
    readonly password: string | undefined;
  };
}

/**
 * `REDIS_URL` (one server), or `REDIS_CLUSTER_NODES`: comma-separated `host:port`, or URLs in the usual forms
 * (`redis://`, `rediss://` for TLS, `user:password@`), credentials and TLS shared by every node.
 */
export function readRedisSettings(read: EnvReader, problems: string[]): RedisSettings {
  const name = read.optional('REDIS_PREFIX') ?? 'works';
  const nodes = read.optional('REDIS_CLUSTER_NODES');
  if (nodes === undefined) return { url: read.required('REDIS_URL') ?? '', prefix: name, name };

  if (read.optional('REDIS_URL') !== undefined) problems.push('set REDIS_URL (one server) or REDIS_CLUSTER_NODES (a cluster), not both');
  if (/[{}]/.test(name)) problems.push("REDIS_PREFIX may not contain { or } on a cluster (it becomes the keys' hash tag)");
  const seeds: ClusterSeed[] = [];
  let tls = false;
  let username: string | undefined;
  let password: string | undefined;
  for (const entry of nodes.split(',').map((s) => s.trim())) {
    const url = parseNode(entry);
    if (!url) {
      problems.push(`REDIS_CLUSTER_NODES: "${entry}" is not host:port or a redis:// or rediss:// URL with a port`);
      continue;
    }
    seeds.push({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port) });
    tls ||= url.protocol === 'rediss:';
    username ??= url.username ? decodeURIComponent(url.username) : undefined;
    password ??= url.password ? decodeURIComponent(url.password) : undefined;
  }
  return { url: '', prefix: `{${name}}`, name, cluster: { seeds, tls, username, password } };
}

function parseNode(entry: string): URL | undefined {
  try {
    const url = new URL(entry.includes('://') ? entry : `redis://${entry}`);
    return (url.protocol === 'redis:' || url.protocol === 'rediss:') && url.port !== '' && url.hostname !== '' ? url : undefined;
  } catch {
    return undefined;
  }
}

/**
 * BullMQ's key prefix for a queue. One server keeps the prefix every release has used (`<name>:bull`); on a
 * cluster each queue is its own hash tag, so each queue's scripts stay in one slot and queues spread over the
 * masters. (No BullMQ call here spans two queues: a dead letter is an `add` to its queue.)
 */
export function bullPrefix(redis: Pick<RedisSettings, 'name' | 'cluster'>, queue: string): string {
  return redis.cluster ? `{${redis.name}:bull:${queue}}` : `${redis.name}:bull`;
}
