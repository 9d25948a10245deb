import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { loadConfig, type QueueName } from '../../shared/config';
import { openResources, handlesOf } from '../../shared/resources';
import { afterCommit, effects, mergeEffects, type EffectDeps } from '../../shared/transactions/effects';

// A configuration naming unreachable servers: nothing here may connect.
const env = {
  DATABASE_URL: 'postgres://127.0.0.1:1/none',
  REDIS_URL: 'redis://127.0.0.1:1',
  S3_BUCKET: 'b',
  S3_ACCESS_KEY_ID: 'a',
  S3_SECRET_ACCESS_KEY: 's',
  CHAIN_TESTNET_WS: 'ws://127.0.0.1:1',
  RELAYER_SEED_TESTNET: '//Alice',
  SECRETS_KEY: randomBytes(32).toString('base64'),
  OIDC_ISSUER: 'https://idp',
  OIDC_AUDIENCE: 'works-api',
  OIDC_JWKS_URL: 'https://idp/jwks',
};
const config = loadConfig(env);
const log = pino({ level: 'silent' });

describe('resources per role', () => {
  it('a worker opens only what its queues use', () => {
    expect([...handlesOf({ worker: ['certificates'] })].sort()).to.deep.equal(['db', 'storage']);
    expect([...handlesOf({ worker: ['webhooks'] })].sort()).to.deep.equal(['box', 'db', 'queues', 'redis']);
    expect(handlesOf({ worker: ['prepare'] }).has('chains')).to.equal(true);
    expect(handlesOf({ worker: ['webhooks', 'certificates'] }).has('chains')).to.equal(false);
    // the web's chain connection serves /readyz
    expect([...handlesOf('web')].sort()).to.deep.equal(['box', 'chains', 'db', 'prepareEvents', 'queues', 'redis', 'storage']);
  });

  it('a handle the role did not open throws, naming the role; a variant by spread keeps what was opened', async () => {
    const resources = openResources(config, log, { worker: ['certificates'] });
    try {
      expect(resources.hasChains).to.equal(false);
      expect(() => resources.chains).to.throw('the worker of certificates did not open chains');
      expect(() => resources.redis).to.throw('did not open redis');
      expect(() => resources.prepareEvents()).to.throw('did not open prepareEvents');
      expect(resources.storage.bucket).to.equal('b');
      const variant = { ...resources, config: { ...config, s3: { ...config.s3, bucket: 'other' } } };
      expect(variant.storage).to.equal(resources.storage);
      expect(Object.keys(variant)).to.not.include('chains');
    } finally {
      await resources.close();
    }
  });
});

/** The large clients a process may load: the chain's, S3's and the certificates' PDF renderer. */
const LARGE = ['@polkadot/api', '@aws-sdk/client-s3', 'pdfkit'];

/**
 * Which of LARGE a worker of these queues has loaded once it has made their processors, as the worker entry point
 * does (jobs/main.ts and its modules first), in a process of its own started as the Procfile starts a worker.
 */
async function largeClientsOf(queues: QueueName[]): Promise<string[]> {
  const script = `
    require('./jobs/main');
    const { loadConfig } = require('./shared/config');
    const { openResources } = require('./shared/resources');
    const { PROCESSORS } = require('./jobs/registry');
    const queues = ${JSON.stringify(queues)};
    const app = openResources(loadConfig(JSON.parse(process.env.WORKER_ENV)), require('pino')({ level: 'silent' }), { worker: queues });
    for (const queue of queues) PROCESSORS[queue](app);
    const files = Object.keys(require.cache);
    const large = ${JSON.stringify(LARGE)}.filter((name) => files.some((file) => file.includes('/node_modules/' + name + '/')));
    process.stdout.write(JSON.stringify(large), () => process.exit(0));
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '-e', script], {
    cwd: path.resolve(__dirname, '../..'),
    env: { PATH: process.env.PATH, WORKER_ENV: JSON.stringify(env) },
    timeout: 30_000, // a child that hangs is killed rather than outlive the run
  });
  return JSON.parse(stdout) as string[];
}

describe('what a worker process loads', () => {
  it('the code of its queues and handles only: no chain client in a webhooks worker, no PDF renderer in a chain worker', async () => {
    const [webhooks, certificates, chain] = await Promise.all([
      largeClientsOf(['webhooks', 'webhooks-dead']),
      largeClientsOf(['certificates']),
      largeClientsOf(['chain']),
    ]);
    expect(webhooks).to.deep.equal([]);
    expect(certificates).to.deep.equal(['@aws-sdk/client-s3', 'pdfkit']);
    expect(chain).to.deep.equal(['@polkadot/api']);
  });
});

/** Effects' handles a test gives: queues (one failing, if named), a database and Redis that record what they are given. */
function effectHandles(failing?: 'webhooks' | 'certificates') {
  const added: { queue: string; name: string; data: unknown; opts: Record<string, unknown> }[] = [];
  const queue = (name: string, fail = false) => ({
    add: async (job: string, data: unknown, opts: Record<string, unknown>) => {
      if (fail) throw new Error('redis away');
      added.push({ queue: name, name: job, data, opts });
    },
    addBulk: async (jobs: { name: string; data: unknown; opts: Record<string, unknown> }[]) => {
      if (fail) throw new Error('redis away');
      for (const job of jobs) added.push({ queue: name, name: job.name, data: job.data, opts: job.opts });
    },
  });
  const published: string[] = [];
  const warnings: string[] = [];
  const deps = {
    queues: { webhooks: queue('webhooks', failing === 'webhooks'), certificates: queue('certificates', failing === 'certificates') },
    config: { redis: { prefix: 'p' }, webhooks: { retrySchedule: [1, 5, 30] } },
    // the deliveries' destinations, each its own (so none share a job), through knex's builder; the transactions'
    // rows to publish, through a prepared statement on a connection of the pool (db/knex.ts `prepared`)
    db: Object.assign(
      (table: string) =>
        table === 'webhook_deliveries' && {
          whereIn: (_c: string, ids: string[]) => ({
            where: () => ({
              whereNull: () => ({ select: async () => ids.map((id, i) => ({ id, url: `https://r${i}.example/hook` })) }),
            }),
          }),
        },
      {
        client: {
          emit: () => undefined,
          releaseConnection: async () => undefined,
          acquireConnection: async () => ({
            query: async ({ values }: { values: [string[]] }) => ({
              rows: values[0].map((id) => ({
                id,
                steps: [],
                current_step: 'validating',
                created_at: new Date(),
                updated_at: new Date(),
              })),
            }),
          }),
        },
      },
    ),
    redis: {
      // one update is published alone, several through a pipeline
      publish: async (_c: string, m: string) => published.push(JSON.parse(m).transaction.transaction_id),
      pipeline: () => ({
        publish: (_c: string, m: string) => published.push(JSON.parse(m).transaction.transaction_id),
        exec: async () => [],
      }),
    },
    log: { warn: (_o: unknown, message: string) => warnings.push(message) },
  } as unknown as EffectDeps;
  return { deps, added, published, warnings };
}

describe('after-commit effects, with the handles a test gives', () => {
  const done = mergeEffects([
    effects({ deliveries: [{ id: 'd1', traceparent: null }], published: ['t1'] }),
    effects({ deliveries: [{ id: 'd2', traceparent: null }], certificates: [{ workId: 'w', version: 2 }] }),
  ]);

  it("enqueues each delivery with the schedule's attempts, publishes once, asks for each certificate; a lost certificate only logs", async () => {
    const { deps, added, published, warnings } = effectHandles('certificates');
    await afterCommit(deps, done);
    expect(added.map((a) => [a.queue, a.name, a.data, a.opts])).to.deep.equal([
      ['webhooks', 'deliver', { deliveryId: 'd1' }, { jobId: 'd1', attempts: 4, backoff: { type: 'schedule' } }],
      ['webhooks', 'deliver', { deliveryId: 'd2' }, { jobId: 'd2', attempts: 4, backoff: { type: 'schedule' } }],
    ]);
    expect(published).to.deep.equal(['t1']);
    expect(warnings).to.deep.equal(['certificates not enqueued; each will be rendered on first download']);
  });

  it('publishes and asks for the certificates even when the deliveries cannot be enqueued, then fails (the job retries)', async () => {
    const { deps, added, published } = effectHandles('webhooks');
    let failed: Error | undefined;
    await afterCommit(deps, done).catch((err: Error) => (failed = err));
    expect(failed?.message).to.equal('redis away');
    expect(published).to.deep.equal(['t1']);
    expect(added.map((a) => [a.queue, a.data])).to.deep.equal([['certificates', { workId: 'w', version: 2 }]]);
  });
});
