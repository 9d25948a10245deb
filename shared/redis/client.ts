import { Cluster, Redis as Server, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { RedisSettings } from './settings';

/** A connection to the service's Redis: one server, or a Redis Cluster (`REDIS_CLUSTER_NODES`). */
export type Redis = Server | Cluster;

/**
 * A connection to one server whose commands of one turn of the event loop leave in one write: a command written
 * at once (the connection ready, not one of a MULTI or pipeline, which pass their own stream) corks the socket
 * unless it is corked already, until the next check phase of the loop. Auto-pipelining also made one write of a
 * turn's commands, but answered none of them before all were answered and sent no batch while another was out,
 * which under init's load kept every command, its reply and the request waiting on it alive across
 * young-generation collections, to be promoted and collected by the major ones (docs/performance.md, section 33).
 * Corked, each command is answered as its reply arrives, and nothing bounds the commands out at once but the
 * requests. The wrapper is the instance's: a `duplicate()` of it would batch nothing.
 */
function batchTurns(server: Server): Server {
  const send = server.sendCommand.bind(server);
  server.sendCommand = (command, stream) => {
    const socket = server.stream;
    if (!stream && socket && server.status === 'ready' && !socket.writableCorked) {
      socket.cork();
      setImmediate(uncork, socket);
    }
    return send(command, stream);
  };
  return server;
}

const uncork = (socket: Server['stream']) => socket.uncork();

/**
 * Two connection profiles. The web answers quickly when Redis is gone (a command fails at once and
 * the request gets 503) while it keeps reconnecting in the background; workers and BullMQ wait and retry.
 * On a cluster the same profile applies to every node's connection, and ioredis follows MOVED/ASK and
 * refreshes its slot map after a failover.
 */
export function createRedis(settings: RedisSettings, profile: 'web' | 'worker', name: string, extra: RedisOptions = {}): Redis {
  const retry = (attempt: number) => Math.min(attempt * 200, 2000);
  const web = profile === 'web';
  // a turn's commands in one write: on a cluster by auto-pipelining (per slot), on one server by corking
  const { enableAutoPipelining: batched = web, ...perNode } = extra;
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
      enableAutoPipelining: batched,
      // TLS checks the certificate against the name the node announces, not an address a lookup made of it
      ...(tls ? { dnsLookup: (address: string, callback: (err: null, address: string) => void) => callback(null, address) } : {}),
      redisOptions: { ...node, ...(tls ? { tls: {} } : {}), ...(username ? { username } : {}), ...(password ? { password } : {}) },
    };
    client = new Cluster(
      seeds.map((s) => ({ ...s })),
      options,
    );
  } else {
    const server = new Server(settings.url, { ...node, retryStrategy: retry, enableOfflineQueue: !web });
    client = batched ? batchTurns(server) : server;
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
