/**
 * Operator CLI (docs/api.md#operator-cli): `npm run --silent admin -- <command>`. Prints one JSON object on stdout and
 * exits 0, or an error envelope on stderr and exits non-zero. Reads `.data/dev.env` for any setting the
 * environment lacks, so it reaches the services `npm run dev` started.
 */
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { format, parseArgs } from 'node:util';
import { loadConfig, parseEnvFile, processEnv, type Config, type Env } from '../config';
import { AppError, notFound } from '../errors';
import { createDb } from '../db/knex';
import { SecretBox } from '../crypto/secret-box';
import { createOrganization, creditOrganization, isUuid, setOrganizationStatus, showOrganization } from '../organizations/service';
import { mintDevToken, readDevIdpKey } from '../dev/identity-provider';
import { createRedis, type Redis } from '../redis/client';
import { createQueues, closeQueues, type Queues } from '../queue/queues';
import { listDeadDeliveries, retryDeadDeliveries } from '../webhooks/dead-letters';
import { ChainConnections } from '../chain/connections';
import { findWallet } from '../organizations/repo';
import { listVersions, workOnNetwork } from '../works/repo';
import { verifyAnchors, versionIsValid } from '../chain/verify';
import { transactionStory } from '../support/transaction-story';
import { organizationActivity } from '../support/org-activity';
import { parseSince } from './since';

const DEV_ENV_FILE = path.resolve(__dirname, '../../.data/dev.env');

type Flags = Record<string, string | boolean | undefined>;
type Command = (config: Config, flags: Flags) => Promise<unknown>;

const withDb = async <T>(config: Config, fn: (db: ReturnType<typeof createDb>) => Promise<T>): Promise<T> => {
  const db = createDb({ ...config.database, poolMax: 2 });
  try {
    return await fn(db);
  } finally {
    await db.destroy();
  }
};

const COMMANDS: Record<string, Command> = {
  'org create': (config, f) =>
    withDb(config, (db) =>
      createOrganization(
        { db, box: new SecretBox(config.secrets.key), chains: config.chains },
        { name: required(f, 'name'), credits: optionalInt(f, 'credits') },
      ),
    ),
  'org show': (config, f) => withDb(config, (db) => showOrganization(db, required(f, 'org'))),
  'org credit': (config, f) =>
    withDb(config, (db) => creditOrganization(db, required(f, 'org'), requiredInt(f, 'amount'), f.reason as string | undefined)),
  'org activity': (config, f) => {
    const limit = optionalInt(f, 'limit') ?? 100;
    if (limit < 1 || limit > 1000) throw usage('--limit must be between 1 and 1000');
    const since = parseSince(required(f, 'since'));
    return withDb(config, (db) => organizationActivity(db, { organizationId: required(f, 'org'), since, limit }));
  },
  'transaction show': (config, f) => withDb(config, (db) => transactionStory(db, required(f, 'id'))),
  'org suspend': (config, f) =>
    withDb(config, (db) => withRedis(config, (redis) => setOrganizationStatus({ db, redis, config }, required(f, 'org'), 'suspended'))),
  'org activate': (config, f) =>
    withDb(config, (db) => withRedis(config, (redis) => setOrganizationStatus({ db, redis, config }, required(f, 'org'), 'active'))),
  'idp token': async (config, f) => {
    if (!config.identity.devKeyFile) throw usage('idp token works only with the embedded development identity provider (DEV_IDP_KEY_FILE)');
    const org = required(f, 'org');
    const role = (f.role as string | undefined) ?? 'admin';
    if (role !== 'admin' && role !== 'operator') throw usage('--role must be admin or operator');
    const ttlSeconds = optionalInt(f, 'ttl') ?? Math.min(3600, config.identity.maxTokenAgeSeconds);
    if (ttlSeconds > config.identity.maxTokenAgeSeconds)
      throw usage(`--ttl must be at most ADMIN_TOKEN_MAX_AGE (${config.identity.maxTokenAgeSeconds})`);
    await withDb(config, (db) => showOrganization(db, org));
    return mintDevToken(await readDevIdpKey(config.identity.devKeyFile), {
      issuer: config.identity.issuer,
      audience: config.identity.audience,
      organizationId: org,
      subject: f.sub as string | undefined,
      ttlSeconds,
      roles: [role],
    });
  },
  verify: (config, f) => {
    const network = required(f, 'network');
    if (network !== 'testnet' && network !== 'mainnet') throw usage('--network must be testnet or mainnet');
    const atsId = requiredInt(f, 'ats-id');
    return withDb(config, async (db) => {
      const work = await workOnNetwork(db, network, atsId);
      if (!work) throw notFound('Work');
      const wallet = (await findWallet(db, work.organizationId, network))!;
      const versions = await listVersions(db, work.id);
      const chains = new ChainConnections(config.chains.filter((c) => c.network === network));
      try {
        const checks = await verifyAnchors(chains, network, {
          atsId,
          ownerPublicKey: wallet.publicKey,
          versions: versions.map((v) => ({ version: v.version, commitment: v.commitment, blockHash: v.blockHash, txHash: v.txHash })),
        });
        const result = { network, ats_id: atsId, work_id: work.id, valid: checks.every(versionIsValid), versions: checks };
        if (!result.valid) {
          const failed = checks.filter((c) => !versionIsValid(c));
          throw new AppError(
            'verification.failed',
            `${failed.length} of ${checks.length} versions do not verify against the chain`,
            failed.map((c) => ({ path: `/versions/${c.version}`, message: JSON.stringify(c) })),
          );
        }
        return result;
      } finally {
        await chains.close();
      }
    });
  },
  'webhooks dead': (config) => withDb(config, async (db) => ({ deliveries: await listDeadDeliveries(db) })),
  'webhooks retry': (config, f) => {
    if (Boolean(f.delivery) === Boolean(f['all-dead'])) throw usage('give exactly one of --delivery ID or --all-dead');
    const which = f['all-dead'] ? ('all-dead' as const) : { deliveryId: required(f, 'delivery') };
    if (which !== 'all-dead' && !isUuid(which.deliveryId)) throw notFound('Dead delivery');
    return withDb(config, (db) =>
      withQueues(config, async (queues) => {
        const retried = await retryDeadDeliveries({ db, queues, webhooks: config.webhooks }, which);
        if (which !== 'all-dead' && retried === 0) throw notFound('Dead delivery');
        return { retried };
      }),
    );
  },
};

const withRedis = async <T>(config: Config, fn: (redis: Redis) => Promise<T>): Promise<T> => {
  const redis = createRedis(config.redis, 'worker', 'works-api:cli');
  try {
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
};

const withQueues = <T>(config: Config, fn: (queues: Queues) => Promise<T>): Promise<T> =>
  withRedis(config, async (redis) => {
    const queues = createQueues(redis, config.redis);
    try {
      return await fn(queues);
    } finally {
      await closeQueues(queues);
    }
  });

const OPTIONS = {
  network: { type: 'string' },
  'ats-id': { type: 'string' },
  delivery: { type: 'string' },
  'all-dead': { type: 'boolean' },
  name: { type: 'string' },
  credits: { type: 'string' },
  org: { type: 'string' },
  amount: { type: 'string' },
  reason: { type: 'string' },
  sub: { type: 'string' },
  role: { type: 'string' },
  ttl: { type: 'string' },
  id: { type: 'string' },
  since: { type: 'string' },
  limit: { type: 'string' },
} as const;

function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (typeof value !== 'string' || value === '') throw usage(`--${name} is required`);
  return value;
}

function optionalInt(flags: Flags, name: string): number | undefined {
  return flags[name] === undefined ? undefined : requiredInt(flags, name);
}

function requiredInt(flags: Flags, name: string): number {
  const raw = required(flags, name);
  if (!/^-?\d+$/.test(raw)) throw usage(`--${name} must be an integer`);
  return Number(raw);
}

const usage = (message: string) => new AppError('common.bad_request', message);

function environment(): Env {
  let fromFile: Env = {};
  try {
    fromFile = parseEnvFile(readFileSync(DEV_ENV_FILE, 'utf8'));
  } catch {
    // no dev runner settings: the environment alone must configure the CLI
  }
  return { ...fromFile, ...processEnv() };
}

export async function runCli(argv: string[]): Promise<{ code: number; stdout?: string; stderr?: string }> {
  const requestId = randomUUID();
  try {
    const { positionals, values } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
    const name = positionals[0] === 'verify' ? 'verify' : positionals.slice(0, 2).join(' ');
    const command = COMMANDS[name];
    if (!command || positionals.length !== name.split(' ').length)
      throw usage(`unknown command "${positionals.join(' ')}"; commands: ${Object.keys(COMMANDS).join(', ')}`);
    const result = await command(loadConfig(environment()), values as Flags);
    return { code: 0, stdout: JSON.stringify(result) };
  } catch (err) {
    const known = err instanceof AppError;
    const parseError = !known && (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    const code = known ? err.code : parseError ? 'common.bad_request' : 'common.internal';
    const message = known || parseError ? (err as Error).message : `${(err as Error).message}`;
    const details = known ? err.details : undefined;
    return { code: 1, stderr: JSON.stringify({ error: { code, message, request_id: requestId, ...(details ? { details } : {}) } }) };
  }
}

if (require.main === module) {
  // stdout carries exactly one JSON object; libraries that chat on the console (@polkadot/api) go to stderr.
  for (const method of ['log', 'info', 'debug'] as const)
    console[method] = (...args: unknown[]) => process.stderr.write(`${format(...args)}\n`);
  runCli(process.argv.slice(2)).then(({ code, stdout, stderr }) => {
    if (stdout) process.stdout.write(`${stdout}\n`);
    if (stderr) process.stderr.write(`${stderr}\n`);
    process.exitCode = code;
  });
}
