import path from 'node:path';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { call, eventually, expectError, startApp, testLogger, type TestApp } from '../helpers/app';
import { startTestWorkers, type TestWorkers } from '../helpers/workers';
import { createKey, createOrg, issuedSecrets } from '../helpers/factories';
import { register, settled } from '../helpers/registration';
import { WebhookReceiver } from '../helpers/receiver';
import { deliverEvent, deliveryReaches } from '../helpers/deliveries';
import { adminToken, operatorToken } from '../helpers/identity';
import { configWith } from '../helpers/services';
import { scrape, type Scrape } from '../helpers/prometheus';
import { openResources } from '../../shared/resources';
import { createWebApp } from '../../web/app';
import { createHttpServer } from '../../web/http-server';
import { startJobs } from '../../jobs/main';
import { FEE_WINDOW_BLOCKS } from '../../shared/metrics/state';
import { relayerAddress } from '../../shared/chain/keys';
import type { Config } from '../../shared/config';

const OPERATOR = { user: 'metrics-ops', password: randomBytes(18).toString('base64url') };
const BASIC = { Authorization: `Basic ${Buffer.from(`${OPERATOR.user}:${OPERATOR.password}`).toString('base64')}` };

/** Every metric of the service, by where it is scraped (README's "Operations / metrics" lists the same). */
const WEB_METRICS = [
  'works_api_http_request_duration_seconds',
  'works_api_queue_jobs',
  'works_api_queue_oldest_waiting_age_seconds',
  'works_api_transactions',
  'works_api_transaction_oldest_open_age_seconds',
  'works_api_webhook_dead_letters',
  'works_api_relayer_free_balance',
  'works_api_relayer_fee_blocks_covered',
  'works_api_chain_head_lag_blocks',
  'works_api_chain_connected',
  'works_api_readiness_check_ok',
];
const WORKER_METRICS = [
  'works_api_transactions_settled_total',
  'works_api_confirm_to_finalized_seconds',
  'works_api_confirm_to_webhook_seconds',
  'works_api_chain_batch_size',
  'works_api_webhook_attempts_total',
  'works_api_webhook_dead_letters_total',
  'works_api_relayer_fees_paid_total',
];

describe('operations metrics (issue 22)', function () {
  this.timeout(120_000);
  let config: Config;
  let app: TestApp;
  let workers: TestWorkers;
  let receiver: WebhookReceiver;
  let api: ApiPromise;

  before(async () => {
    issuedSecrets.add(OPERATOR.password);
    config = configWith({
      REDIS_PREFIX: `metrics_${Date.now()}`,
      WEBHOOK_RETRY_SCHEDULE: '1,1,1',
      OPERATOR_CREDENTIAL: `${OPERATOR.user}:${OPERATOR.password}`,
      METRICS_PORT: '0',
      METRICS_HOST: '127.0.0.1',
    });
    // every scrape reads the state afresh here (5 s in service; shared-read.test.ts covers the reuse)
    app = await startApp(config, { metricsStateMaxAgeMs: 0 });
    workers = await startTestWorkers(config, ['prepare', 'chain', 'webhooks', 'webhooks-dead']);
    receiver = await new WebhookReceiver().start();
    // a registration's webhook is refused once with 500 (retried), then taken; a failure's always refused with 400 (dead)
    receiver.respond = (req) => {
      if (req.body?.event === 'work_failed') return { status: 400 };
      const seen = receiver.received.filter((r) => r.headers['x-service-delivery'] === req.headers['x-service-delivery']).length;
      return { status: seen === 1 ? 500 : 200 };
    };
    api = await ApiPromise.create({ provider: new WsProvider(config.chains[0]!.wsUrl), noInitWarn: true });
  });
  after(async () => {
    await api?.disconnect();
    await receiver?.stop();
    await workers?.stop();
    await app?.close();
  });

  it('lists in README\'s "Operations / metrics" exactly the metrics this test watches', () => {
    const readme = readFileSync(path.resolve(__dirname, '../../README.md'), 'utf8');
    const section = readme.slice(
      readme.indexOf('## Operations / metrics'),
      readme.indexOf('\n## ', readme.indexOf('## Operations / metrics') + 1),
    );
    const listed = new Set(section.match(/works_api_[a-z_]+/g));
    expect([...listed].sort()).to.deep.equal([...WEB_METRICS, ...WORKER_METRICS].sort());
  });

  it('serves a worker its own /metrics on METRICS_PORT, to operators only', async () => {
    const base = workers.metricsUrl!;
    expect(base).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    const refused = await call(base, 'GET', '/metrics');
    expectError(refused, 401, 'auth.unauthorized');
    expect(refused.headers.get('www-authenticate')).to.match(/^Basic realm=/);
    expectError(
      await call(base, 'GET', '/metrics', { headers: { Authorization: `Basic ${Buffer.from('metrics-ops:wrong').toString('base64')}` } }),
      401,
      'auth.unauthorized',
    );
    const org = await createOrg(app.context);
    expectError(await call(base, 'GET', '/metrics', { token: await adminToken({ organizationId: org }) }), 403, 'common.forbidden');
    expect((await call(base, 'GET', '/metrics', { token: await operatorToken({ organizationId: org }) })).status).to.equal(200);
    const scraped = await scrape(base, BASIC);
    for (const name of WORKER_METRICS) expect(scraped.types.has(name), name).to.equal(true);
    // the process metrics keep their standard names
    expect(scraped.types.get('process_cpu_user_seconds_total')).to.equal('counter');
    expectError(await call(base, 'GET', '/anything-else', { headers: BASIC }), 404, 'common.not_found');
  });

  it('stops a worker at start, before it takes a job, when its METRICS_PORT is taken', async () => {
    const taken = configWith({ METRICS_PORT: new URL(workers.metricsUrl!).port, METRICS_HOST: '127.0.0.1', WORKER_QUEUES: 'certificates' });
    const started = await startJobs(taken, testLogger()).then(
      (jobs) => jobs.stop().then(() => 'started'),
      (err: NodeJS.ErrnoException) => err.code,
    );
    expect(started).to.equal('EADDRINUSE');
  });

  it('moves every metric during a registration, a retried and a dead-lettered webhook; the relayer balance falls by the fee', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org, ['works:register'], receiver.url);
    const web0 = await scrape(app.url, BASIC);
    const worker0 = await scrape(workers.metricsUrl!, BASIC);
    for (const name of WEB_METRICS) expect(web0.types.has(name), name).to.equal(true);
    const pending0 = web0.value('works_api_transactions', { network: 'testnet', status: 'pending' })!;
    expect(pending0).to.be.a('number');

    // the chain queue held: the confirmed transaction waits, in PostgreSQL and in its queue
    const chainQueue = app.context.queues.chain;
    await chainQueue.pause();
    let txId: string;
    try {
      const r = await register(app.url, key.token);
      expect(r.confirm.status, r.confirm.text).to.equal(202);
      txId = r.confirm.body.transaction_id;
      const held = await eventually(async () => {
        const s = await scrape(app.url, BASIC);
        return s.value('works_api_queue_oldest_waiting_age_seconds', { queue: 'chain' })! > 0 ? s : undefined;
      }, 'the chain job to wait');
      expect(held.value('works_api_transactions', { network: 'testnet', status: 'pending' })).to.equal(pending0 + 1);
      expect(held.value('works_api_transaction_oldest_open_age_seconds', { network: 'testnet' })).to.be.greaterThan(0);
      expect(held.value('works_api_queue_jobs', { queue: 'chain', state: 'waiting' })).to.equal(1);
    } finally {
      await chainQueue.resume();
    }

    const tx = await settled(app.context, txId);
    expect(tx.status).to.equal('finalized');
    const delivery = await app.context
      .db('webhook_deliveries as d')
      .join('events as e', 'e.id', 'd.event_id')
      .where('e.transaction_id', txId)
      .first('d.id');
    await deliveryReaches(app.context, delivery.id, 'delivered');
    const dead = await deliverEvent(app.context, receiver.url);
    await deliveryReaches(app.context, dead.deliveryId, 'dead');
    await eventually(
      async () => ((await scrape(workers.metricsUrl!, BASIC)).count('works_api_webhook_dead_letters_total') === 1 ? true : undefined),
      'the dead letter',
    );

    // what the chain says the relayer paid for the batch that carried it
    const relayer = api.createType('AccountId', await relayerAddress(config.chains[0]!.relayerSeed)).toString();
    const fee = await feePaidIn(api, relayer, tx.block_hash, tx.extrinsic_index);
    // each readiness check's result, as the latest /readyz found it (set by /readyz, not by the scrape)
    expect((await call(app.url, 'GET', '/readyz')).status).to.equal(200);
    const web1 = await scrape(app.url, BASIC);
    const worker1 = await scrape(workers.metricsUrl!, BASIC);
    for (const check of ['postgres', 'redis', 's3', 'chain:testnet'])
      expect(web1.value('works_api_readiness_check_ok', { check }), check).to.equal(1);
    const moved = (s0: Scrape, s1: Scrape, name: string, labels: Record<string, string> = {}) =>
      s1.count(name, labels) - s0.count(name, labels);

    // worker: events; every series that can appear is there from the start, at 0 where nothing happened
    for (const status of ['finalized', 'failed'])
      expect(worker1.value('works_api_transactions_settled_total', { network: 'testnet', type: 'add_version', status }), status).to.equal(
        0,
      );
    expect(worker1.value('works_api_confirm_to_webhook_seconds_count', { event: 'work_updated' })).to.equal(0);
    const registered = { network: 'testnet', type: 'register' };
    expect(moved(worker0, worker1, 'works_api_transactions_settled_total', { ...registered, status: 'finalized' })).to.equal(1);
    expect(moved(worker0, worker1, 'works_api_confirm_to_finalized_seconds_count', registered)).to.equal(1);
    const toFinal = moved(worker0, worker1, 'works_api_confirm_to_finalized_seconds_sum', registered);
    const age = (Date.now() - new Date(tx.created_at).getTime()) / 1000;
    expect(toFinal).to.be.greaterThan(0).and.at.most(age);
    expect(moved(worker0, worker1, 'works_api_confirm_to_webhook_seconds_count', { event: 'work_registered' })).to.equal(1);
    expect(moved(worker0, worker1, 'works_api_confirm_to_webhook_seconds_sum', { event: 'work_registered' })).to.be.within(toFinal, age);
    expect(moved(worker0, worker1, 'works_api_chain_batch_size_count', { network: 'testnet' })).to.equal(1);
    expect(moved(worker0, worker1, 'works_api_chain_batch_size_sum', { network: 'testnet' })).to.equal(1);
    expect(moved(worker0, worker1, 'works_api_webhook_attempts_total', { outcome: 'retry' })).to.equal(1);
    expect(moved(worker0, worker1, 'works_api_webhook_attempts_total', { outcome: 'delivered' })).to.equal(1);
    expect(moved(worker0, worker1, 'works_api_webhook_attempts_total', { outcome: 'failed' })).to.equal(1);
    expect(moved(worker0, worker1, 'works_api_webhook_dead_letters_total')).to.equal(1);
    expect(moved(worker0, worker1, 'works_api_relayer_fees_paid_total', { network: 'testnet' })).to.be.closeTo(fee, fee * 1e-12);

    // web: state
    const net = { network: 'testnet' };
    for (const status of ['pending', 'submitted', 'in_block'])
      expect(web1.value('works_api_transactions', { ...net, status })).to.be.a('number');
    expect(web1.value('works_api_transactions', { ...net, status: 'pending' })).to.equal(pending0);
    expect(web1.value('works_api_transaction_oldest_open_age_seconds', net)).to.be.at.least(0);
    expect(moved(web0, web1, 'works_api_queue_jobs', { queue: 'chain', state: 'completed' })).to.equal(1);
    expect(web1.value('works_api_queue_jobs', { queue: 'chain', state: 'waiting' })).to.equal(0);
    expect(web1.value('works_api_queue_oldest_waiting_age_seconds', { queue: 'chain' })).to.equal(0);
    expect(moved(web0, web1, 'works_api_webhook_dead_letters')).to.equal(1);
    expect(
      moved(web0, web1, 'works_api_http_request_duration_seconds_count', { method: 'POST', route: '/v1/works/confirm', status: '202' }),
    ).to.equal(1);
    expect(web1.value('works_api_chain_connected', net)).to.equal(1);
    expect(web1.value('works_api_chain_head_lag_blocks', net)).to.be.at.least(0);
    // the relayer's free balance fell by exactly the fee (up to the floats' rounding of a balance this size)
    const [free0, free1] = [web0.value('works_api_relayer_free_balance', net)!, web1.value('works_api_relayer_free_balance', net)!];
    expect(fee).to.be.greaterThan(0);
    expect(free0 - free1).to.be.closeTo(fee, 4 * Number.EPSILON * free0);
    // at most what the balance covers at this fee alone per window (other batches of the window only add to the rate)
    const covered = web1.value('works_api_relayer_fee_blocks_covered', net)!;
    expect(covered)
      .to.be.greaterThan(0)
      .and.at.most(((free1 * FEE_WINDOW_BLOCKS) / fee) * (1 + 1e-9));
  });

  it('answers in time while PostgreSQL hangs on a lock, and leaves no query of its behind', async () => {
    const context = openResources(config, testLogger(), 'web');
    const server = createHttpServer(createWebApp(context, { metricsStateMaxAgeMs: 0 }).callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    // another session holds the table as a migration would: a scrape's count waits on it, not refused
    const locker = await context.db.transaction();
    await locker.raw('LOCK TABLE transactions IN ACCESS EXCLUSIVE MODE');
    const ours = () =>
      context.db.raw(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%from "transactions"%'`,
      );
    try {
      const started = Date.now();
      const s = await scrape(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, BASIC);
      expect(Date.now() - started).to.be.below(10_000);
      expect(s.series('works_api_transactions')).to.deep.equal([]);
      expect(s.series('works_api_queue_jobs').length).to.be.greaterThan(0); // the rest is read
      // PostgreSQL cancelled the count itself: nothing of the scrape still waits on the lock, holding a connection
      await eventually(async () => ((await ours()).rows[0].n === 0 ? true : undefined), 'the scrape’s count cancelled', 5_000);
    } finally {
      await locker.rollback();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await context.close();
    }
  });

  it('still answers 200 with PostgreSQL, Redis and the node away: what could not be read is left out', async () => {
    const [pg, redis, node] = await Promise.all([closedPort(), closedPort(), closedPort()]);
    const away = configWith({
      DATABASE_URL: `postgres://works:x@127.0.0.1:${pg}/works`,
      REDIS_URL: `redis://127.0.0.1:${redis}`,
      CHAIN_TESTNET_WS: `ws://127.0.0.1:${node}`,
      OPERATOR_CREDENTIAL: `${OPERATOR.user}:${OPERATOR.password}`,
    });
    // the web app as web/main.ts builds it, without waiting for dependencies that will not come
    const context = openResources(away, testLogger(), 'web');
    const server = createHttpServer(createWebApp(context, { metricsStateMaxAgeMs: 0 }).callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const started = Date.now();
      const s = await scrape(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, BASIC);
      expect(Date.now() - started).to.be.below(10_000);
      expect(s.value('works_api_chain_connected', { network: 'testnet' })).to.equal(0);
      for (const name of [
        'works_api_queue_jobs',
        'works_api_transactions',
        'works_api_webhook_dead_letters',
        'works_api_relayer_free_balance',
        'works_api_chain_head_lag_blocks',
      ]) {
        expect(s.types.has(name), name).to.equal(true);
        expect(s.series(name), name).to.deep.equal([]);
      }
      expect(s.series('process_resident_memory_bytes')).to.have.length(1);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await context.close();
    }
  });
});

/**
 * What the relayer paid for the extrinsic at `index` of the block, in token units, as the chain reports it:
 * `transactionPayment.TransactionFeePaid` where the runtime emits it; the local chain's (Rococo Asset Hub
 * v2.2) does not, and reports the fee as the signer's `balances.Withdraw` (less any `balances.Deposit` back).
 */
async function feePaidIn(api: ApiPromise, relayer: string, blockHash: string, index: number): Promise<number> {
  const records = (await (await api.at(blockHash)).query.system.events()) as unknown as {
    phase: { isApplyExtrinsic: boolean; asApplyExtrinsic: { toNumber(): number } };
    event: { section: string; method: string; data: { toString(): string }[] };
  }[];
  const events = records.filter((r) => r.phase.isApplyExtrinsic && r.phase.asApplyExtrinsic.toNumber() === index).map((r) => r.event);
  const named = (section: string, method: string) => events.filter((e) => e.section === section && e.method === method);
  const amount = (e: { data: { toString(): string }[] }, at: number) => BigInt(e.data[at]!.toString());
  const ofRelayer = (e: { data: { toString(): string }[] }) => e.data[0]!.toString() === relayer;
  const [paid] = named('transactionPayment', 'TransactionFeePaid');
  const planck = paid
    ? amount(paid, 1)
    : named('balances', 'Withdraw')
        .filter(ofRelayer)
        .reduce((sum, e) => sum + amount(e, 1), 0n) -
      named('balances', 'Deposit')
        .filter(ofRelayer)
        .reduce((sum, e) => sum + amount(e, 1), 0n);
  return Number(planck) / 10 ** (api.registry.chainDecimals[0] ?? 12);
}

/** A port of 127.0.0.1 nothing listens on (taken, then released). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
