import os from 'node:os';
import path from 'node:path';
import { promises as fs } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { loadConfig, processEnv, type Config, type Env } from '../../shared/config';
import type { Knex } from 'knex';
import { createDb, migrateLatest } from '../../shared/db/knex';
import { ensurePostgres, createDatabaseIfMissing, dropDatabase } from '../../shared/dev/embedded/postgres';
import { startEmbedded, type EmbeddedDependencies } from '../../shared/dev/embedded';
import { IDP, startIdentityProvider, stopIdentityProvider } from './identity';

export interface TestServices {
  readonly env: Env;
  readonly config: Config;
  readonly embedded: EmbeddedDependencies;
  readonly dataDir: string;
}

let services: TestServices | undefined;
let teardown: (() => Promise<void>)[] = [];

/**
 * Real dependencies for the whole run, found or started as `npm run dev` does: a fresh database and a
 * private Redis key prefix per run, an s3rver and a chopsticks chain of the run's own, all torn down after.
 */
export async function startTestServices(): Promise<TestServices> {
  const outer = processEnv();
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'works-test-'));
  teardown.push(() => fs.rm(dataDir, { recursive: true, force: true }));

  const pg = await ensurePostgres(outer.DATABASE_URL, dataDir);
  teardown.push(pg.stop);
  const dbName = `works_test_${runId}`;
  const databaseUrl = await createDatabaseIfMissing(pg.serverUrl, dbName);
  teardown.push(() => dropDatabase(pg.serverUrl, dbName));

  await startIdentityProvider();
  teardown.push(async () => stopIdentityProvider());

  const base: Env = {
    NODE_ENV: 'test',
    LOG_LEVEL: 'info',
    DATABASE_URL: databaseUrl,
    REDIS_URL: outer.REDIS_URL,
    // a chain of the caller's (the soak runs one in a process of its own); else one is started here
    ...(outer.CHAIN_TESTNET_WS ? { CHAIN_TESTNET_WS: outer.CHAIN_TESTNET_WS, RELAYER_SEED_TESTNET: outer.RELAYER_SEED_TESTNET } : {}),
    REDIS_PREFIX: `test_${runId}`,
    OIDC_ISSUER: IDP.issuer,
    OIDC_AUDIENCE: IDP.audience,
    OIDC_JWKS_URL: IDP.jwksUrl,
    SECRETS_KEY: randomBytes(32).toString('base64'),
    S3_BUCKET: `works-test`,
    ALLOW_HTTP_WEBHOOKS: 'true',
    // receivers are local servers; the SSRF refusal has tests of its own that turn this off
    WEBHOOK_ALLOW_PRIVATE: 'true',
    UPLOAD_TTL_SECONDS: '600',
    // no load balancer to wait for: a web process started from here stops at once (the shutdown test sets its own)
    SHUTDOWN_DRAIN_MS: '0',
  };
  const embedded = await startEmbedded(base, { dataDir, databaseName: dbName, blocks: 'instant', webBaseUrl: 'http://127.0.0.1:0' });
  teardown.push(embedded.stop);
  const env: Env = { ...base, ...embedded.env };
  const config = loadConfig(env);

  const db = createDb(config.database);
  await migrateLatest(db).finally(() => db.destroy());
  services = { env, config, embedded, dataDir };
  return services;
}

export async function stopTestServices(): Promise<void> {
  const steps = teardown.reverse();
  teardown = [];
  for (const step of steps) await step().catch((err) => process.stderr.write(`teardown: ${(err as Error).message}\n`));
  services = undefined;
}

export function testServices(): TestServices {
  if (!services) throw new Error('test services are not started (test/helpers/hooks.ts)');
  return services;
}

/** The run's configuration with some variables changed, validated like any other. */
export function configWith(overrides: Env): Config {
  return loadConfig({ ...testServices().env, ...overrides });
}

/**
 * An organization and an API key of it as bare rows, for a database of a test's own at an earlier migration
 * (where the services' own writes may not fit the schema yet).
 */
export async function insertBareOrgAndKey(db: Knex, name = 'o'): Promise<{ org: { id: string }; key: { id: string } }> {
  const [org] = await db('organizations').insert({ name }).returning('id');
  const [key] = await db('api_keys')
    .insert({
      organization_id: org.id,
      name: 'k',
      prefix: 'wrk_live_0000000',
      token_hash: Buffer.alloc(32, 7),
      scopes: ['works:register'],
      webhook_secret_encrypted: 'x',
    })
    .returning('id');
  return { org, key };
}

/**
 * A database of a test's own on the run's server (for migrations run up and down), created in `before` and
 * dropped in `after` of the calling `describe`. `db()` is its connection, unmigrated.
 */
export function useOwnDatabase(prefix: string): () => Knex {
  const name = `${prefix}_${Date.now().toString(36)}`;
  let serverUrl: string | undefined;
  let db: Knex | undefined;
  before(async () => {
    serverUrl = testServices().config.database.url.replace(/\/[^/]*$/, '');
    db = createDb({ ...testServices().config.database, url: await createDatabaseIfMissing(serverUrl, name) });
  });
  after(async () => {
    await db?.destroy();
    if (serverUrl) await dropDatabase(serverUrl, name);
  });
  return () => db!;
}
