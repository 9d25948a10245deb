import { Redis, type RedisOptions } from 'ioredis';

export type { Redis };

/**
 * Two connection profiles. The web answers quickly when Redis is gone (a command fails at once and
 * the request gets 503) while it keeps reconnecting in the background; workers and BullMQ wait and retry.
 */
export function createRedis(url: string, profile: 'web' | 'worker', name: string, extra: RedisOptions = {}): Redis {
  const common: RedisOptions = {
    connectionName: name,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    lazyConnect: false,
  };
  const options: RedisOptions =
    profile === 'web'
      ? {
          ...common,
          enableOfflineQueue: false,
          maxRetriesPerRequest: 0,
          connectTimeout: 2000,
          commandTimeout: 2000,
          enableAutoPipelining: true,
        }
      : { ...common, maxRetriesPerRequest: null, enableReadyCheck: true };
  const client = new Redis(url, { ...options, ...extra });
  // Connection errors are reported through readiness and per command; an unhandled 'error' event would crash.
  client.on('error', () => undefined);
  return client;
}

export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  return (
    err.name === 'MaxRetriesPerRequestError' ||
    /enableOfflineQueue|Connection is closed|ECONNREFUSED|Command timed out|Stream isn't writeable/i.test(err.message)
  );
}
