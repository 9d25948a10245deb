import os from 'node:os';
import path from 'node:path';
import { promises as fs } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Redis } from 'ioredis';
import { loadConfig, processEnv, type Config, type Env } from '../../shared/config';
import { createDb, migrateLatest } from '../../shared/db/knex';
import { ensurePostgres, createDatabaseIfMissing, dropDatabase } from '../../shared/dev/embedded/postgres';
import { DEV_RELAYER_SEED, startEmbedded } from '../../shared/dev/embedded';
import { localChainSettings } from '../../shared/dev/embedded/chain';
import { relayerAddress } from '../../shared/chain/keys';
import { startChainProcess, type ChainProcess } from './processes';

export interface BenchServices {
  /** Every variable a web or worker process of this bench needs. */
  readonly env: Env;
  readonly config: Config;
  readonly dataDir: string;
  /** What the run ran against: PostgreSQL and Redis server versions. */
  readonly versions: Record<string, string>;
  /** The chain's process, when started in one of its own (`chainProcess`). */
  readonly chain?: ChainProcess;
  stop(): Promise<void>;
}

export interface BenchServiceOptions {
  /** 'instant' (a block per extrinsic) or a block time in ms, as DEV_BLOCK_TIME_MS under `npm run dev`. */
  readonly blocks: 'instant' | number;
  /** Variables that differ from `npm run dev`'s for this bench (each named in its results). */
  readonly env?: Env;
  /**
   * The chopsticks chain in a process of its own instead of this one (where `npm run dev` and the tests keep it),
   * so that its CPU is measured apart from the bench's clients and receiver.
   */
  readonly chainProcess?: boolean;
}

/**
 * The dependencies `npm run dev` uses, found or started the same way (startEmbedded: the local PostgreSQL and
 * Redis, else embedded ones; s3rver; a chopsticks chain), isolated per bench: a database
 * `works_bench_<name>_<run>` and a Redis prefix of its own, both removed at the end with the s3rver data.
 */
export async function startBenchServices(name: string, options: BenchServiceOptions): Promise<BenchServices> {
  const outer = processEnv();
  const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), `works-bench-${name}-`));
  const stops: (() => Promise<void>)[] = [() => fs.rm(dataDir, { recursive: true, force: true })];
  const stop = async () => {
    for (const step of stops.reverse()) await step().catch((err) => process.stderr.write(`bench teardown: ${(err as Error).message}\n`));
  };
  try {
    const pg = await ensurePostgres(outer.DATABASE_URL, dataDir);
    stops.push(pg.stop);
    const dbName = `works_bench_${name}_${runId}`;
    const databaseUrl = await createDatabaseIfMissing(pg.serverUrl, dbName);
    stops.push(() => dropDatabase(pg.serverUrl, dbName));
    const prefix = `bench_${name}_${runId}`;
    const base: Env = {
      ...serviceSettings(),
      NODE_ENV: 'development',
      LOG_LEVEL: 'warn',
      DATABASE_URL: databaseUrl,
      REDIS_URL: outer.REDIS_URL,
      REDIS_PREFIX: prefix,
      S3_BUCKET: 'works-bench',
      SECRETS_KEY: randomBytes(32).toString('base64'),
      // as under `npm run dev`: receivers on this machine are allowed
      WEBHOOK_ALLOW_PRIVATE: 'true',
      ...options.env,
    };
    let chain: ChainProcess | undefined;
    if (options.chainProcess) {
      chain = await startChainProcess(options.blocks, await relayerAddress(DEV_RELAYER_SEED));
      stops.push(chain.stop);
      Object.assign(
        base,
        { CHAIN_TESTNET_WS: chain.wsUrl, RELAYER_SEED_TESTNET: DEV_RELAYER_SEED },
        localChainSettings(base, options.blocks),
      );
    }
    const embedded = await startEmbedded(base, { dataDir, databaseName: dbName, blocks: options.blocks, webBaseUrl: 'http://127.0.0.1:0' });
    stops.push(embedded.stop);
    const env: Env = { ...base, ...embedded.env };
    stops.push(() => dropRedisPrefix(env.REDIS_URL!, prefix));
    const config = loadConfig(env);
    const db = createDb(config.database);
    await migrateLatest(db).finally(() => db.destroy());
    const versions = await serverVersions(config);
    return { env, config, dataDir, versions, ...(chain ? { chain } : {}), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function serverVersions(config: Config): Promise<Record<string, string>> {
  const pg = new Client({ connectionString: config.database.url });
  await pg.connect();
  const postgres = (await pg.query('show server_version')).rows[0].server_version as string;
  await pg.end();
  const redis = new Redis(config.redis.url, { lazyConnect: true });
  await redis.connect();
  const info = await redis.info('server');
  redis.disconnect();
  return { postgresql: postgres, redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown' };
}

/** Removes every key of the bench's prefix (queues, sessions, quotes) from a shared Redis. */
async function dropRedisPrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/**
 * Settings of the service to compare, from BENCH_SERVICE_ENV (a JSON object of variables, docs/performance.md,
 * Reproduce): `BENCH_SERVICE_ENV='{"CHAIN_BATCH_INTERVAL_MS":"250"}' npm run bench -- pipeline`. The bench's own
 * settings win (its database, Redis prefix, chain and those it needs to measure at all).
 */
export function serviceSettings(): Env {
  const given = processEnv().BENCH_SERVICE_ENV;
  if (!given) return {};
  const parsed: unknown = JSON.parse(given);
  if (!parsed || typeof parsed !== 'object' || Object.values(parsed).some((v) => typeof v !== 'string'))
    throw new Error('BENCH_SERVICE_ENV: a JSON object of strings, e.g. {"CHAIN_BATCH_INTERVAL_MS":"250"}');
  return parsed as Env;
}
