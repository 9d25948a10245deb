import type { Knex } from 'knex';
import type { Redis } from './redis/client';
import type { RedisSettings } from './redis/settings';
import { pingStorage, type Storage } from './storage/s3';
import type { ChainConnections } from './chain/connections';
import type { Config } from './config';
import { evictionNow } from './redis/eviction';
import { withTimeout } from './timeout';

export interface ReadinessReport {
  readonly ready: boolean;
  readonly checks: Record<string, { ok: boolean; error?: string; detail?: Record<string, unknown> }>;
}

const TIMEOUT_MS = 3000;

/** Probes every dependency in parallel, each bounded, and names what failed. */
export async function checkReadiness(ctx: {
  readonly db: Knex;
  readonly redis: Redis;
  readonly storage: Storage;
  readonly chains: ChainConnections;
  readonly config: { readonly env: Config['env']; readonly redis: Pick<RedisSettings, 'prefix'> };
}): Promise<ReadinessReport> {
  const probes: Record<string, () => Promise<Record<string, unknown> | void>> = {
    postgres: async () => void (await ctx.db.raw('select 1')),
    // a command in the service's own slot: on a cluster a PING answers from any node, even while the master
    // holding the service's keys is down and every request would fail
    redis: async () => {
      await ctx.redis.exists(`${ctx.config.redis.prefix}:readyz`);
      // production refuses to start on a Redis that may evict keys (redis/eviction.ts); one whose settings changed
      // since, or a failover to a server set otherwise, is no more ready than that start would have been
      if (ctx.config.env !== 'production') return;
      const problem = await evictionNow(ctx.redis);
      if (problem) throw new Error(problem);
    },
    s3: () => pingStorage(ctx.storage),
  };
  for (const net of ctx.chains.networks) {
    probes[`chain:${net.network}`] = async () => {
      const health = await ctx.chains.health(net.network, TIMEOUT_MS);
      if (!health.ready || health.error) throw new Error(health.error ?? 'not ready');
      return { best_block: health.bestBlock, runtime: health.specName };
    };
  }
  const entries = await Promise.all(
    Object.entries(probes).map(async ([name, probe]) => {
      try {
        const detail = await withTimeout(probe(), TIMEOUT_MS, 'timed out');
        return [name, detail ? { ok: true, detail } : { ok: true }] as const;
      } catch (err) {
        return [name, { ok: false, error: (err as Error).message || 'unreachable' }] as const;
      }
    }),
  );
  const checks: ReadinessReport['checks'] = Object.fromEntries(entries);
  return { ready: Object.values(checks).every((c) => c.ok), checks };
}
