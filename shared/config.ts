/**
 * The only module that reads the process environment. `loadConfig` parses it once into frozen
 * sections and throws a ConfigError naming every variable that is missing or malformed.
 */
import { ConfigError, deepFreeze, EnvReader, type Env } from './env-reader';
import { readRedisSettings, type RedisSettings } from './redis/settings';
import { defaultExplorerTemplate } from './chain/explorer';

export const NETWORKS = ['testnet', 'mainnet'] as const;
export type Network = (typeof NETWORKS)[number];

export const QUEUE_NAMES = ['prepare', 'chain', 'webhooks', 'webhooks-dead', 'maintenance', 'certificates'] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

export type { Env };
export { ConfigError, parseEnvFile, withProcessEnv } from './env-reader';

export interface ChainNetworkConfig {
  readonly network: Network;
  readonly wsUrl: string;
  readonly ss58Prefix: number;
  readonly relayerSeed: string;
  /** `{block}` and `{index}` filled in by chain/explorer.ts, which gives the default (Allfeat in production). */
  readonly explorerUrlTemplate: string;
}

export interface Config {
  readonly env: 'development' | 'test' | 'production';
  readonly http: { readonly port: number; readonly host: string; readonly bodyLimitBytes: number; readonly trustProxy: boolean };
  readonly log: { readonly level: string };
  readonly metrics: { readonly port: number | undefined; readonly host: string };
  /** `webStatementTimeoutMs`: WEB_STATEMENT_TIMEOUT_MS, the bound of a web's statements, lock waits included (db/knex.ts). */
  readonly database: { readonly url: string; readonly poolMax: number; readonly webStatementTimeoutMs: number };
  readonly redis: RedisSettings;
  readonly s3: {
    readonly endpoint: string | undefined;
    readonly region: string;
    readonly bucket: string;
    readonly accessKeyId: string;
    readonly secretAccessKey: string;
    readonly forcePathStyle: boolean;
  };
  readonly chains: readonly ChainNetworkConfig[];
  readonly secrets: { readonly key: Buffer };
  readonly identity: {
    readonly issuer: string;
    readonly audience: string;
    readonly jwksUrl: string;
    /** Development only: the embedded provider's private JWK file; enables its JWKS route. */
    readonly devKeyFile: string | undefined;
    /** The longest lifetime (`exp` − `iat`) an admin or operator token may have; one without `exp` is refused. */
    readonly maxTokenAgeSeconds: number;
  };
  readonly workers: {
    readonly queues: readonly QueueName[];
    readonly concurrency: number;
    /** A job's lock; a worker that dies silently (SIGKILL, lost host) has its jobs taken over after this. */
    readonly lockMs: number;
    /** How often each worker is checked for being wedged (jobs/watchdog.ts); keep it above BullMQ's 15 s fetch retry. */
    readonly watchdogMs: number;
    /** The nice value a process running only background queues (QueueDefinition.background) takes; 0 keeps its own. */
    readonly backgroundNice: number;
  };
  readonly sessions: { readonly ttlSeconds: number };
  readonly ttl: { readonly uploadSeconds: number; readonly quoteSeconds: number; readonly idempotencySeconds: number };
  readonly webhooks: {
    readonly allowHttp: boolean;
    /** Seconds to wait before each retry (docs/api.md#delivery-and-retries). */
    readonly retrySchedule: readonly number[];
    readonly timeoutMs: number;
    /** Deliver to private, loopback, link-local… addresses (development and tests only): no SSRF check. */
    readonly allowPrivate: boolean;
    /** Deliveries in flight at once per worker process. */
    readonly concurrency: number;
    /** How long an idle connection to a vetted destination is kept for the next delivery; 0 = a fresh connection each time. */
    readonly keepAliveMs: number;
    /** Days a delivery attempt is kept before the maintenance job prunes it (at least 30). */
    readonly attemptRetentionDays: number;
  };
  /**
   * Operators (the service's own staff, never an organization's admin): Bull Board, /metrics and every
   * cross-organization operation take the operator credential, or an identity token with the `operator` role.
   */
  readonly operators: {
    /** HTTP Basic credential (`OPERATOR_CREDENTIAL=user:password`); undefined = operator-role tokens only. */
    readonly credential: { readonly username: string; readonly password: string } | undefined;
    /** When not empty, only operator-role tokens whose org_id is listed here are operators (required in production without a credential). */
    readonly orgIds: readonly string[];
  };
  readonly rateLimit: { readonly perSecond: number; readonly burst: number };
  readonly pricing: {
    /** Credits charged per whole native token of network fee (fees are rounded up to a whole credit). */
    readonly creditsPerToken: number;
    readonly serviceFeeCredits: number;
    readonly storageFreeBytes: number;
    readonly storageCreditsPerMb: number;
    readonly registrationDepositCredits: number;
    readonly versionDepositCredits: number;
  };
  readonly uploads: { readonly maxBytes: number };
  /** How long the web waits for a prepare job before answering 503. */
  readonly prepareTimeoutMs: number;
  /** Most calls one relayer batch carries (further bounded by the runtime's weight and length limits). */
  readonly chainBatchMax: number;
  /** The least time between two relayer batches while calls keep being made ready between blocks. */
  readonly chainBatchIntervalMs: number;
  /**
   * How long a confirmed transaction's call is sent again after refusals that were not its own (a pool, a
   * nonce, an era, a connection in the way) before it fails and is refunded.
   */
  readonly chainGiveUpAfterSeconds: number;
  /**
   * Development only: when the node's genesis differs from the one this database recorded (a local chain
   * started afresh), forget this database's chain state for it instead of refusing to submit.
   */
  readonly chainForgetOnNewGenesis: boolean;
  /** The reconciler: how often it runs, and how long a transaction must sit untouched to count as stuck. */
  readonly reconcile: { readonly everyMs: number; readonly idleSeconds: number };
  /** Live transaction tracking (WebSocket and socket.io on the web process). */
  readonly live: {
    /** Open live sockets an organization may hold on one web process. */
    readonly maxSocketsPerOrg: number;
    /** Ping period; a socket that has not answered the previous ping is dropped. */
    readonly heartbeatSeconds: number;
    /** A socket with no frame either way for this long is closed. */
    readonly idleTimeoutSeconds: number;
    /** Bytes a socket may have waiting to be sent before it is dropped as a slow consumer. */
    readonly maxBufferedBytes: number;
  };
  /**
   * The web's stop on SIGTERM or SIGINT (web/drain.ts): /readyz answers 503 for `drainMs` while requests are
   * still served, then no new connection is accepted; whatever is unanswered `timeoutMs` after the signal is cut.
   */
  readonly shutdown: { readonly drainMs: number; readonly timeoutMs: number };
}

/** The process environment, for entry points that pass it on (the dev runner, the CLI). */
export const processEnv = (): Env => process.env;

/** For entry points: print every configuration problem and exit non-zero. */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(1);
  }
}

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const read = new EnvReader(env, problems);
  const nodeEnv = read.oneOf('NODE_ENV', ['development', 'test', 'production'] as const, 'development');
  const secretsKey = read.required('SECRETS_KEY');
  let key = Buffer.alloc(0);
  if (secretsKey !== undefined) {
    key = Buffer.from(secretsKey, 'base64');
    if (key.length !== 32) problems.push('SECRETS_KEY must be 32 bytes encoded in base64 (openssl rand -base64 32)');
  }

  const chains: ChainNetworkConfig[] = [];
  for (const network of NETWORKS) {
    const upper = network.toUpperCase();
    const wsUrl = read.optional(`CHAIN_${upper}_WS`);
    if (wsUrl === undefined) continue;
    if (!/^wss?:\/\//.test(wsUrl)) problems.push(`CHAIN_${upper}_WS must be a ws:// or wss:// URL`);
    const relayerSeed = read.required(`RELAYER_SEED_${upper}`) ?? '';
    chains.push({
      network,
      wsUrl,
      ss58Prefix: read.int(`CHAIN_${upper}_SS58_PREFIX`, 42, 0, 16383),
      relayerSeed,
      explorerUrlTemplate: read.optional(`EXPLORER_URL_${upper}`) ?? defaultExplorerTemplate(nodeEnv === 'production', network, wsUrl),
    });
  }
  if (chains.length === 0) problems.push('CHAIN_TESTNET_WS or CHAIN_MAINNET_WS must be set (at least one network)');
  // 3 s at least: /metrics' own statements take up to 3 s (metrics/state.ts)
  const webStatementTimeoutMs = read.int('WEB_STATEMENT_TIMEOUT_MS', 5000, 3000, 20_000);

  const config: Config = {
    env: nodeEnv,
    http: {
      port: read.int('PORT', 3000, 0, 65535),
      host: read.optional('HOST') ?? '0.0.0.0',
      bodyLimitBytes: read.int('HTTP_BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
      trustProxy: read.bool('TRUST_PROXY', false),
    },
    log: { level: read.oneOf('LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'info') },
    metrics: { port: read.int('METRICS_PORT', undefined, 0, 65535), host: read.optional('METRICS_HOST') ?? '0.0.0.0' },
    database: { url: read.required('DATABASE_URL') ?? '', poolMax: read.int('DATABASE_POOL_MAX', 10, 1, 1000), webStatementTimeoutMs },
    redis: readRedisSettings(read, problems),
    s3: {
      endpoint: read.optional('S3_ENDPOINT'),
      region: read.optional('S3_REGION') ?? 'us-east-1',
      bucket: read.required('S3_BUCKET') ?? '',
      accessKeyId: read.required('S3_ACCESS_KEY_ID') ?? '',
      secretAccessKey: read.required('S3_SECRET_ACCESS_KEY') ?? '',
      forcePathStyle: read.bool('S3_FORCE_PATH_STYLE', false),
    },
    chains,
    secrets: { key },
    identity: {
      issuer: read.required('OIDC_ISSUER') ?? '',
      audience: read.required('OIDC_AUDIENCE') ?? '',
      jwksUrl: read.required('OIDC_JWKS_URL') ?? '',
      devKeyFile: read.optional('DEV_IDP_KEY_FILE'),
      maxTokenAgeSeconds: read.int('ADMIN_TOKEN_MAX_AGE', 3600, 60, 86400),
    },
    workers: {
      queues: read.subset('WORKER_QUEUES', QUEUE_NAMES),
      concurrency: read.int('WORKER_CONCURRENCY', 8, 1, 1000),
      lockMs: read.int('WORKER_LOCK_MS', 30_000, 1000, 600_000),
      watchdogMs: read.int('WORKER_WATCHDOG_MS', 30_000, 1000, 600_000),
      backgroundNice: read.int('WORKER_BACKGROUND_NICE', 10, 0, 19),
    },
    sessions: { ttlSeconds: read.int('SESSION_TTL_SECONDS', 3600, 1, 86400) },
    ttl: {
      uploadSeconds: read.int('UPLOAD_TTL_SECONDS', 600, 1, 600),
      quoteSeconds: read.int('QUOTE_TTL_SECONDS', 300, 1, 300),
      idempotencySeconds: read.int('IDEMPOTENCY_TTL_SECONDS', 86400, 1, 86400),
    },
    webhooks: {
      allowHttp: read.bool('ALLOW_HTTP_WEBHOOKS', nodeEnv !== 'production'),
      retrySchedule: read.intList('WEBHOOK_RETRY_SCHEDULE', [1, 5, 30, 120, 600, 1800], 0, 86400),
      timeoutMs: read.int('WEBHOOK_TIMEOUT_MS', 30_000, 100, 30_000),
      allowPrivate: read.bool('WEBHOOK_ALLOW_PRIVATE', false),
      concurrency: read.int('WEBHOOK_CONCURRENCY', 32, 1, 1000),
      keepAliveMs: read.int('WEBHOOK_KEEP_ALIVE_MS', 4000, 0, 60_000),
      attemptRetentionDays: read.int('WEBHOOK_ATTEMPT_RETENTION_DAYS', 30, 30, 3650),
    },
    operators: { credential: operatorCredential(read, nodeEnv, problems), orgIds: read.list('OPERATOR_ORG_IDS') },
    rateLimit: { perSecond: read.int('RATE_LIMIT_PER_SECOND', 20, 1, 100_000), burst: read.int('RATE_LIMIT_BURST', 100, 1, 1_000_000) },
    pricing: {
      creditsPerToken: read.int('CREDITS_PER_TOKEN', 100, 1, 1e12),
      serviceFeeCredits: read.int('SERVICE_FEE_CREDITS', 10, 0, 1e9),
      storageFreeBytes: read.int('STORAGE_FREE_BYTES', 10 * 1024 * 1024, 0, 1e12),
      storageCreditsPerMb: read.int('STORAGE_CREDITS_PER_MB', 1, 0, 1e9),
      registrationDepositCredits: read.int('REGISTRATION_DEPOSIT_CREDITS', 5, 0, 1e9),
      versionDepositCredits: read.int('VERSION_DEPOSIT_CREDITS', 2, 0, 1e9),
    },
    uploads: { maxBytes: read.int('UPLOAD_MAX_BYTES', 500 * 1000 * 1000, 1, 500 * 1000 * 1000) },
    prepareTimeoutMs: read.int('PREPARE_TIMEOUT_MS', 120_000, 1000, 600_000),
    chainBatchMax: read.int('CHAIN_BATCH_MAX', 1000, 1, 10_000),
    chainBatchIntervalMs: read.int('CHAIN_BATCH_INTERVAL_MS', 250, 0, 60_000),
    chainGiveUpAfterSeconds: read.int('CHAIN_GIVE_UP_AFTER', 3600, 1, 7 * 86400),
    chainForgetOnNewGenesis: read.bool('CHAIN_FORGET_ON_NEW_GENESIS', false),
    reconcile: {
      everyMs: read.int('RECONCILE_EVERY_MS', 30_000, 1000, 3_600_000),
      idleSeconds: read.int('RECONCILE_IDLE_SECONDS', 120, 1, 86400),
    },
    live: {
      maxSocketsPerOrg: read.int('WS_MAX_SOCKETS_PER_ORG', 1000, 1, 1_000_000),
      heartbeatSeconds: read.int('WS_HEARTBEAT_SECONDS', 30, 1, 3600),
      idleTimeoutSeconds: read.int('WS_IDLE_TIMEOUT_SECONDS', 900, 1, 86400),
      maxBufferedBytes: read.int('WS_MAX_BUFFERED_BYTES', 256 * 1024, 1024, 64 * 1024 * 1024),
    },
    shutdown: {
      drainMs: read.int('SHUTDOWN_DRAIN_MS', 10_000, 0, 600_000),
      timeoutMs: read.int('SHUTDOWN_TIMEOUT_MS', 25_000, 1000, 3_600_000),
    },
  };
  if (config.identity.devKeyFile && nodeEnv === 'production') problems.push('DEV_IDP_KEY_FILE must not be set in production');
  if (config.webhooks.allowPrivate && nodeEnv === 'production') problems.push('WEBHOOK_ALLOW_PRIVATE must not be set in production');
  if (nodeEnv === 'production' && !config.operators.credential && config.operators.orgIds.length === 0) {
    problems.push(
      'operators must be configured in production: OPERATOR_CREDENTIAL, or OPERATOR_ORG_IDS (the identity provider organizations whose operator-role tokens are operators)',
    );
  }
  if (config.shutdown.timeoutMs <= config.shutdown.drainMs)
    problems.push('SHUTDOWN_TIMEOUT_MS must be greater than SHUTDOWN_DRAIN_MS (requests accepted while draining need time to be answered)');
  if (config.chainForgetOnNewGenesis && nodeEnv === 'production')
    problems.push('CHAIN_FORGET_ON_NEW_GENESIS must not be set in production');

  if (problems.length) throw new ConfigError(problems);
  return deepFreeze(config);
}

/** `user:password`; in production the password must be long enough not to be guessed. */
function operatorCredential(read: EnvReader, nodeEnv: Config['env'], problems: string[]): Config['operators']['credential'] {
  const raw = read.optional('OPERATOR_CREDENTIAL');
  if (raw === undefined) return undefined;
  const colon = raw.indexOf(':');
  const username = colon > 0 ? raw.slice(0, colon) : '';
  const password = colon > 0 ? raw.slice(colon + 1) : '';
  if (!username || !password) problems.push('OPERATOR_CREDENTIAL must be user:password');
  else if (nodeEnv === 'production' && password.length < 16)
    problems.push('OPERATOR_CREDENTIAL password must be at least 16 characters in production');
  return { username, password };
}
