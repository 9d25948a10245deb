import { Cluster, Redis as Server, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { RedisSettings } from './settings';

/** A connection to the service's Redis: one server, or a Redis Cluster (`REDIS_CLUSTER_NODES`). */
export type Redis = Server | Cluster;

/**
 * Two connection profiles. The web answers quickly when Redis is gone (a command fails at once and
 * the request gets 503) while it keeps reconnecting in the background; workers and BullMQ wait and retry.
 * On a cluster the same profile applies to every node's connection, and ioredis follows MOVED/ASK and
 * refreshes its slot map after a failover.
 */
export function createRedis(settings: RedisSettings, profile: 'web' | 'worker', name: string, extra: RedisOptions = {}): Redis {
  const retry = (attempt: number) => Math.min(attempt * 200, 2000);
  const web = profile === 'web';
  const { enableAutoPipelining = web, ...perNode } = extra;
  const node: RedisOptions = {
    connectionName: name,
    ...(web
      ? { maxRetriesPerRequest: 0, connectTimeout: 2000, commandTimeout: 2000 }
      : { maxRetriesPerRequest: null, enableReadyCheck: true }),
    ...perNode,
  };
  let client: Redis;
  if (settings.cluster) {
    const { seeds, tls, username, password } = settings.cluster;
    const options: ClusterOptions = {
      clusterRetryStrategy: retry,
      // While a failover runs, other nodes still redirect to the dead master and then answer CLUSTERDOWN (full
      // coverage): each retry waits, and a worker waits through about 15 s of it, the web about 2 s (then 503).
      retryDelayOnMoved: 100,
      retryDelayOnFailover: 300,
      retryDelayOnClusterDown: 300,
      maxRedirections: web ? 6 : 50,
      enableOfflineQueue: !web,
      enableAutoPipelining,
      // TLS checks the certificate against the name the node announces, not an address a lookup made of it
      ...(tls ? { dnsLookup: (address: string, callback: (err: null, address: string) => void) => callback(null, address) } : {}),
      redisOptions: { ...node, ...(tls ? { tls: {} } : {}), ...(username ? { username } : {}), ...(password ? { password } : {}) },
    };
    client = new Cluster(
      seeds.map((s) => ({ ...s })),
      options,
    );
  } else {
    client = new Server(settings.url, { ...node, retryStrategy: retry, enableOfflineQueue: !web, enableAutoPipelining });
  }
  // Connection errors are reported through readiness and per command; an unhandled 'error' event would crash.
  client.on('error', () => undefined);
  return client;
}

export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  return (
    err.name === 'MaxRetriesPerRequestError' ||
    err.name === 'ClusterAllFailedError' ||
    /enableOfflineQueue|Connection is closed|ECONNREFUSED|Command timed out|Stream isn't writeable|CLUSTERDOWN|TRYAGAIN|Too many Cluster redirections|refresh slots cache|startup nodes/i.test(
      err.message,
    )
  );
}
