import type { Redis } from '../../shared/redis/client';

/**
 * Redis's command time split by what the keys belong to: each BullMQ queue, and each kind of the service's
 * own keys (upload jobs, key records, rate-limit buckets, idempotency records…). Read from the slow log with
 * its threshold at 0 µs, which logs every command with the time Redis spent executing it (a script with its
 * whole run; not the socket reads and writes around it), its keys among its first arguments. The log's own
 * cost is a little of Redis's CPU, so a run with the split on is not one to read `cpu_ms_redis` from.
 */
export interface RedisSplit {
  /** Stops logging, restores the server's settings and returns µs of command time by part, over the prefix's keys. */
  stop(): Promise<Record<string, number>>;
}

const MAX_ENTRIES = 2_000_000;

export async function startRedisSplit(redis: Redis, prefix: string): Promise<RedisSplit> {
  const [, slower] = (await redis.config('GET', 'slowlog-log-slower-than')) as string[];
  const [, length] = (await redis.config('GET', 'slowlog-max-len')) as string[];
  await redis.config('SET', 'slowlog-max-len', String(MAX_ENTRIES));
  await redis.call('SLOWLOG', 'RESET');
  await redis.config('SET', 'slowlog-log-slower-than', '0');
  return {
    async stop() {
      await redis.config('SET', 'slowlog-log-slower-than', slower!);
      const entries = (await redis.call('SLOWLOG', 'GET', '-1')) as [number, number, number, string[]][];
      await redis.call('SLOWLOG', 'RESET');
      await redis.config('SET', 'slowlog-max-len', length!);
      if (entries.length >= MAX_ENTRIES) throw new Error(`the slow log filled (${MAX_ENTRIES} entries): the split would miss commands`);
      const parts: Record<string, number> = {};
      for (const [, , micros, args] of entries) {
        const part = partOf(args, prefix);
        if (part) parts[part] = (parts[part] ?? 0) + micros;
      }
      return parts;
    },
  };
}

/** `queue <name>` or `service <kind>` for the first argument that is a key of the prefix; none for other commands. */
function partOf(args: readonly string[], prefix: string): string | undefined {
  if (args[0]?.toUpperCase() === 'CLIENT') return undefined; // BullMQ names its connections `<prefix>:<base64 queue>`
  for (const arg of args) {
    const key = arg.replace(/[{}]/g, '');
    if (!key.startsWith(`${prefix}:`)) continue;
    const [kind, name] = key.slice(prefix.length + 1).split(':');
    return kind === 'bull' ? `queue ${name}` : `service ${kind}`;
  }
  return undefined;
}
