import path from 'node:path';
import { promises as fs } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Env } from '../../config';
import { ensurePostgres, createDatabaseIfMissing } from './postgres';
import { ensureRedis } from './redis';
import { startS3rver } from './s3';
import { startLocalChain } from './chain';
import { relayerAddress } from '../../chain/keys';
import { ensureDevIdpKey } from '../identity-provider';

export interface EmbeddedOptions {
  readonly dataDir: string;
  readonly databaseName: string;
  /** 'instant' (tests) or a block time in ms (development). */
  readonly blocks: 'instant' | number;
  /** Base URL the web will listen on; the development identity provider's issuer and JWKS live under it. */
  readonly webBaseUrl: string;
  readonly onStep?: (message: string) => void;
}

export interface EmbeddedDependencies {
  /** Connection settings to merge under the process environment (which always wins). */
  readonly env: Record<string, string>;
  readonly chains: { newBlock(): Promise<void> }[];
  stop(): Promise<void>;
}

export const DEV_RELAYER_SEED = '//WorksRelayer';
const DEV_BUCKET = 'works';

/**
 * For each dependency the environment does not configure, finds or starts a local one (ARCHITECTURE.md,
 * "Embedded defaults"). Used by `npm run dev` and the test harness alike.
 */
export async function startEmbedded(env: Env, options: EmbeddedOptions): Promise<EmbeddedDependencies> {
  const step = options.onStep ?? (() => undefined);
  const stops: (() => Promise<void>)[] = [];
  const out: Record<string, string> = {};
  const chains: { newBlock(): Promise<void> }[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  };
  await fs.mkdir(options.dataDir, { recursive: true });

  try {
    if (!env.DATABASE_URL) {
      const pg = await ensurePostgres(undefined, options.dataDir);
      stops.push(pg.stop);
      out.DATABASE_URL = await createDatabaseIfMissing(pg.serverUrl, options.databaseName);
      step(`PostgreSQL: ${pg.source} server, database ${options.databaseName}`);
    }
    if (!env.REDIS_URL && !env.REDIS_CLUSTER_NODES) {
      const redis = await ensureRedis(undefined);
      stops.push(redis.stop);
      out.REDIS_URL = redis.url;
      step(`Redis: ${redis.source} server at ${redis.url}`);
    }
    if (!env.S3_ENDPOINT) {
      const bucket = env.S3_BUCKET ?? DEV_BUCKET;
      const s3 = await startS3rver(options.dataDir, bucket);
      stops.push(s3.stop);
      Object.assign(out, {
        S3_ENDPOINT: s3.endpoint,
        S3_BUCKET: bucket,
        S3_ACCESS_KEY_ID: s3.accessKeyId,
        S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
        S3_FORCE_PATH_STYLE: 'true',
      });
      step(`S3: s3rver at ${s3.endpoint}, bucket ${bucket}`);
    }
    if (!env.CHAIN_TESTNET_WS && !env.CHAIN_MAINNET_WS) {
      const seed = env.RELAYER_SEED_TESTNET ?? DEV_RELAYER_SEED;
      const chain = await startLocalChain({ endow: [await relayerAddress(seed)], blocks: options.blocks });
      stops.push(chain.stop);
      chains.push(chain);
      Object.assign(out, { CHAIN_TESTNET_WS: chain.wsUrl, RELAYER_SEED_TESTNET: seed });
      step(
        `Chain (testnet): chopsticks running Rococo Asset Hub at ${chain.wsUrl}, ${options.blocks === 'instant' ? 'instant blocks' : `a block every ${options.blocks} ms`}`,
      );
    }
    if (!env.SECRETS_KEY) out.SECRETS_KEY = await persistentSecret(path.join(options.dataDir, 'secrets.key'));
    if (!env.OIDC_JWKS_URL) {
      const keyFile = path.join(options.dataDir, 'idp-key.json');
      await ensureDevIdpKey(keyFile);
      Object.assign(out, {
        DEV_IDP_KEY_FILE: keyFile,
        OIDC_ISSUER: `${options.webBaseUrl}/dev/idp`,
        OIDC_AUDIENCE: 'works-api',
        OIDC_JWKS_URL: `${options.webBaseUrl}/dev/idp/jwks.json`,
      });
      step('Identity provider: development key in .data/idp-key.json (mint tokens with the CLI)');
    }
  } catch (err) {
    await stopAll();
    throw err;
  }
  return { env: out, chains, stop: stopAll };
}

async function persistentSecret(file: string): Promise<string> {
  try {
    return (await fs.readFile(file, 'utf8')).trim();
  } catch {
    const key = randomBytes(32).toString('base64');
    await fs.writeFile(file, key, { mode: 0o600 });
    return key;
  }
}
