import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { call, eventually, startApp, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { spawnWorker, startTestWorkers, useStack, type TestWorkers } from '../helpers/workers';
import { quote, register } from '../helpers/registration';
import { configWith, testServices } from '../helpers/services';
import { startLocalChain } from '../../shared/dev/embedded/chain';
import { freePort } from '../../shared/dev/embedded/net';
import { relayerAddress } from '../../shared/chain/keys';
import { expectExactlyOnce } from '../helpers/exactly-once';
import type { Env } from '../../shared/config';
import { scheduleMaintenance } from '../../jobs/maintenance/processor';

describe('chain work under faults', function () {
  this.timeout(300_000);

  describe('a chain worker killed with SIGKILL', () => {
    const prefix = `kill_${Date.now()}`;
    const env: Env = { REDIS_PREFIX: prefix, WORKER_LOCK_MS: '2000' };
    // web and prepare here; the chain worker is a process of its own, killed mid-way
    const stack = useStack({ env, queues: ['prepare'] });
    let api: ApiPromise;
    before(
      async () => (api = await ApiPromise.create({ provider: new WsProvider(testServices().config.chains[0]!.wsUrl), noInitWarn: true })),
    );
    after(() => api.disconnect());

    const points = {
      'chain.batch_signed': 'after signing and storing a batch, before sending it',
      'chain.in_block': 'between submission and finality',
      'chain.finalized': 'between finality and indexing',
    };
    for (const [point, when] of Object.entries(points)) {
      it(`${when}: every work is registered exactly once and charged once`, async () => {
        const app: TestApp = stack.app;
        const org = await createOrg(app.context, 10_000);
        const key = await createKey(app.context, org);
        const fromBlock = (await api.rpc.chain.getHeader()).number.toNumber();
        const ids: string[] = [];
        for (let i = 0; i < 3; i++) ids.push((await register(app.url, key.token)).confirm.body.transaction_id);

        const worker = spawnWorker({ ...testServices().env, ...env, WORKER_QUEUES: 'chain', WORKS_FAILPOINT: point, LOG_LEVEL: 'warn' });
        expect((await worker.exited).signal).to.equal('SIGKILL');
        const atCrash = await app.context.db('transactions').whereIn('id', ids).pluck('status');
        expect(
          atCrash.filter((s) => s !== 'finalized'),
          'work left unfinished by the crash',
        ).to.not.have.length(0);

        // another worker takes the dead one's jobs once their locks lapse
        const workers = await startTestWorkers(stack.config, ['chain']);
        try {
          await expectExactlyOnce(app.context, api, org, ids, fromBlock);
        } finally {
          await workers.stop();
        }
      });
    }
  });

  describe('Redis flushed mid-run', () => {
    const prefix = `flush_${Date.now()}`;
    const env: Env = { REDIS_PREFIX: prefix, WORKER_LOCK_MS: '2000', RECONCILE_EVERY_MS: '1000', RECONCILE_IDLE_SECONDS: '1' };
    const stack = useStack({ env, queues: ['prepare'] });
    let api: ApiPromise;
    before(
      async () => (api = await ApiPromise.create({ provider: new WsProvider(testServices().config.chains[0]!.wsUrl), noInitWarn: true })),
    );
    after(() => api.disconnect());

    it('the reconciler finishes every confirmed transaction from PostgreSQL', async () => {
      const app = stack.app;
      const org = await createOrg(app.context, 10_000);
      const key = await createKey(app.context, org);
      const fromBlock = (await api.rpc.chain.getHeader()).number.toNumber();
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push((await register(app.url, key.token)).confirm.body.transaction_id);
      // a worker gets part of the way (one batch in a block), then dies
      const worker = spawnWorker({
        ...testServices().env,
        ...env,
        WORKER_QUEUES: 'chain',
        WORKS_FAILPOINT: 'chain.in_block',
        LOG_LEVEL: 'warn',
      });
      expect((await worker.exited).signal).to.equal('SIGKILL');

      // every key of this deployment is gone: queues, jobs, locks, quotes
      const keys = await app.context.redis.keys(`${prefix}:*`);
      expect(keys.length).to.be.above(0);
      await app.context.redis.del(...keys);
      expect(await app.context.queues.chain.getJobCounts()).to.deep.include({ waiting: 0, active: 0 });

      const workers = await startTestWorkers(stack.config, ['chain', 'maintenance']);
      await scheduleMaintenance(app.context);
      try {
        await expectExactlyOnce(app.context, api, org, ids, fromBlock);
      } finally {
        await workers.stop();
      }
    });
  });

  describe('the node away for 20 s', () => {
    // a chain of this test's own, persisted to disk so it restarts where it stopped, with its own relayer
    const relayerSeed = '//OutageRelayer';
    let chain: Awaited<ReturnType<typeof startLocalChain>>;
    let port: number;
    let dbFile: string;
    let app: TestApp;
    let workers: TestWorkers;
    let api: ApiPromise;
    const start = async (resume: boolean) =>
      startLocalChain({ endow: [await relayerAddress(relayerSeed)], blocks: 'instant', port, db: dbFile, resume });

    before(async () => {
      port = await freePort();
      dbFile = path.join(testServices().dataDir, `outage-${Date.now()}.sqlite`);
      chain = await start(false);
      const config = configWith({ REDIS_PREFIX: `outage_${Date.now()}`, CHAIN_TESTNET_WS: chain.wsUrl, RELAYER_SEED_TESTNET: relayerSeed });
      app = await startApp(config);
      workers = await startTestWorkers(config, ['prepare', 'chain']);
      api = await ApiPromise.create({ provider: new WsProvider(chain.wsUrl, 500), noInitWarn: true });
    });
    after(async () => {
      await workers.stop();
      await app.close();
      await api.disconnect();
      await chain.stop();
    });

    it('work confirmed while it is away waits, and completes once it is back', async () => {
      const org = await createOrg(app.context, 10_000);
      const key = await createKey(app.context, org);
      const fromBlock = (await api.rpc.chain.getHeader()).number.toNumber();
      const quotes = [];
      for (let i = 0; i < 3; i++) quotes.push(await quote(app.url, key.token));

      await chain.stop();
      const confirms = await Promise.all(
        quotes.map((q) => call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: q.jobId } })),
      );
      expect(confirms.map((c) => c.status)).to.deep.equal([202, 202, 202]);
      const ids = confirms.map((c) => c.body.transaction_id as string);
      const ready = await eventually(async () => {
        const reply = await call(app.url, 'GET', '/readyz');
        return reply.status === 503 ? reply : undefined;
      }, '/readyz to notice the node is gone');
      expect(ready.body.checks['chain:testnet'].ok).to.equal(false);

      // the outage itself: 20 s by the definition, not a wait for something to happen
      await new Promise((r) => setTimeout(r, 20_000));
      const during = await app.context.db('transactions').whereIn('id', ids).pluck('status');
      expect(
        during.filter((s) => s === 'failed'),
        'nothing fails for the outage alone',
      ).to.have.length(0);
      expect(await app.context.queues.chain.getJobCounts('failed')).to.deep.equal({ failed: 0 });

      chain = await start(true);
      await expectExactlyOnce(app.context, api, org, ids, fromBlock);
      expect((await call(app.url, 'GET', '/readyz')).status).to.equal(200);
    });
  });
  describe('a worker process started while the node is away', () => {
    const relayerSeed = '//LateNodeRelayer';
    let chain: Awaited<ReturnType<typeof startLocalChain>>;
    let port: number;
    let dbFile: string;
    let app: TestApp;
    let preparer: TestWorkers;
    let env: Env;
    const start = async (resume: boolean) =>
      startLocalChain({ endow: [await relayerAddress(relayerSeed)], blocks: 'instant', port, db: dbFile, resume });

    before(async () => {
      port = await freePort();
      dbFile = path.join(testServices().dataDir, `late-node-${Date.now()}.sqlite`);
      chain = await start(false);
      env = { REDIS_PREFIX: `late_node_${Date.now()}`, CHAIN_TESTNET_WS: chain.wsUrl, RELAYER_SEED_TESTNET: relayerSeed };
      app = await startApp(configWith(env));
      preparer = await startTestWorkers(configWith(env), ['prepare']);
    });
    after(async () => {
      await preparer.stop();
      await app.close();
      await chain.stop();
    });

    it('does not die of it, says it is not ready, and serves once the node is back', async () => {
      const org = await createOrg(app.context, 10_000);
      const key = await createKey(app.context, org);
      const txId = (await register(app.url, key.token)).confirm.body.transaction_id as string;
      await chain.stop();

      const logFile = path.join(testServices().dataDir, `late-node-worker-${Date.now()}.log`);
      const fd = fs.openSync(logFile, 'w');
      const worker = spawnWorker({ ...testServices().env, ...env, WORKER_QUEUES: 'chain', LOG_LEVEL: 'info' }, [], fd);
      let exited = false;
      void worker.exited.then(() => (exited = true));
      try {
        const log = () => fs.readFileSync(logFile, 'utf8');
        await eventually(
          async () => (log().includes('not ready: the testnet node is unreachable') ? true : undefined),
          'the worker to say it is not ready',
          60_000,
        );
        // the outage itself, 6 s past that (three failed reconnections, one every 2 s): its length, not a wait for something
        await new Promise((r) => setTimeout(r, 6000));
        expect(exited, 'the worker is still running while the node is away').to.equal(false);

        chain = await start(true);
        await eventually(
          async () => ((await app.context.db('transactions').where({ id: txId }).first()).status === 'finalized' ? true : undefined),
          'the transaction to finalize',
          120_000,
        );
        expect(log()).to.include('the testnet node is reachable: ready');
        expect(exited).to.equal(false);
        expect(log()).to.not.match(/UnhandledPromiseRejection|ERR_UNHANDLED_REJECTION/);
      } finally {
        worker.kill('SIGTERM');
        const how = await worker.exited;
        fs.closeSync(fd);
        expect(how.code, 'a clean shutdown').to.equal(0);
      }
    });
  });
});
