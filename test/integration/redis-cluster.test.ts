import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { Cluster } from 'ioredis';
import type { Config } from '../../shared/config';
import { bullPrefix } from '../../shared/redis/settings';
import { keepMaintenanceScheduled } from '../../jobs/maintenance/processor';
import { call, eventually, logsFromNow, startApp, testLogger, type TestApp } from '../helpers/app';
import { createKey, createOrg } from '../helpers/factories';
import { addVersion, creator, initBody, register, settled } from '../helpers/registration';
import { WebhookReceiver, verifySignature } from '../helpers/receiver';
import { configWith, testServices } from '../helpers/services';
import { startTestWorkers, type TestWorkers } from '../helpers/workers';
import { connect, connectSocketIo, STEPS, type Frame } from '../helpers/live';
import { expectExactlyOnce } from '../helpers/exactly-once';
import { startRedisClusterOrSkip, type LocalRedisCluster } from '../helpers/redis-cluster';
import { insertEndedTransaction } from '../helpers/deliveries';
import { publishTransactionRows, publishTransactionUpdates } from '../../shared/transactions/updates';
import { findTransactions } from '../../shared/transactions/repo';
import { createRedis } from '../../shared/redis/client';
import { checkRedisKeepsKeys } from '../../shared/redis/eviction';

/**
 * The service on a real Redis Cluster (three masters, a replica each, started from `redis-server`): every
 * Redis user goes through ioredis's `Cluster`, and a command that crossed slots would fail the flow with
 * CROSSSLOT. Then a master and its replica die together and come back empty, taking the chain queue with
 * them: every confirmed registration is still anchored once and charged once, through the reconciler.
 */
describe('on a Redis Cluster', function () {
  this.timeout(240_000);
  const prefix = `cluster_${Date.now().toString(36)}`;
  let cluster: LocalRedisCluster;
  let config: Config;
  let app: TestApp;
  let workers: TestWorkers;
  let admin: Cluster;

  before(async function () {
    cluster = await startRedisClusterOrSkip(this, { masters: 3, replicasPerMaster: 1 });
    config = configWith({
      REDIS_URL: undefined,
      REDIS_CLUSTER_NODES: cluster.nodes.join(','),
      REDIS_PREFIX: prefix,
      WEBHOOK_RETRY_SCHEDULE: '1,1,1',
      RECONCILE_EVERY_MS: '1000',
      RECONCILE_IDLE_SECONDS: '2',
      // a worker wedged by the lost shard is replaced within two checks (jobs/watchdog.ts)
      WORKER_LOCK_MS: '2000',
      WORKER_WATCHDOG_MS: '2000',
    });
    app = await startApp(config);
    workers = await startTestWorkers(config, ['prepare', 'chain', 'webhooks', 'maintenance', 'certificates']);
    admin = new Cluster(cluster.nodes.map((n: string) => ({ host: n.split(':')[0], port: Number(n.split(':')[1]) })));
  });

  after(async () => {
    await workers?.stop();
    await app?.close();
    admin?.disconnect();
    await cluster?.stop();
  });

  it('registers a work, adds a version, tracks both live and retries a webhook', async () => {
    const receiver = await new WebhookReceiver().start();
    // the first attempt of every delivery fails: each webhook arrives on its retry
    const seen = new Set<string>();
    receiver.respond = (r) => {
      const id = String(r.headers['x-service-delivery']);
      if (seen.has(id)) return { status: 200 };
      seen.add(id);
      return { status: 503 };
    };
    try {
      const key = await createKey(app.context, await createOrg(app.context), undefined, receiver.url);
      // the same transaction followed over the plain WebSocket and over socket.io from its first step
      await app.context.queues.chain.pause();
      const ioFrames: Frame[] = [];
      let txId: string, ws, io, ioDone;
      try {
        const registered = await register(app.url, key.token, initBody());
        expect(registered.confirm.status).to.equal(202);
        txId = registered.confirm.body.transaction_id;
        ws = await connect(app.url, `/v1/ws/transactions/${txId}`, key.token);
        io = await connectSocketIo(app.url, key.token);
        ioDone = new Promise<void>((resolve) =>
          io!.on('update', (frame: Frame) => {
            ioFrames.push(frame);
            if (frame.transaction.is_complete) resolve();
          }),
        );
        ioFrames.push(await io.timeout(10_000).emitWithAck('subscribe', txId));
      } finally {
        await app.context.queues.chain.resume();
      }
      expect((await ws.closed).code).to.equal(1000);
      await ioDone;
      io.close();
      expect(ws.frames.map((f) => f.transaction.current_step)).to.deep.equal(STEPS);
      expect(ioFrames.map((f) => f.transaction.current_step)).to.deep.equal(STEPS);
      const row = await settled(app.context, txId);
      expect(row.status).to.equal('finalized');

      const version = await addVersion(app.url, key.token, Number(row.ats_id), {
        network: 'testnet',
        creators: [creator({ full_name: 'Second Hand' })],
      });
      expect(version.confirm.status).to.equal(202);
      expect((await settled(app.context, version.confirm.body.transaction_id)).status).to.equal('finalized');
      const versions = await call(app.url, 'GET', `/v1/works/${row.ats_id}/versions`, { token: key.token });
      expect(versions.body.versions.map((v: { version: number }) => v.version)).to.deep.equal([1, 2]);

      // two events, each refused once and acknowledged on its retry, signed both times
      const received = await receiver.waitFor(4);
      const byDelivery = new Map<string, number[]>();
      for (const [i, r] of received.entries()) {
        expect(verifySignature(key.webhookSecret, r)).to.equal(true);
        const id = String(r.headers['x-service-delivery']);
        byDelivery.set(id, [...(byDelivery.get(id) ?? []), i]);
      }
      expect([...byDelivery.values()].map((attempts) => attempts.length)).to.deep.equal([2, 2]);
      expect(received.map((r) => r.body.event).sort()).to.deep.equal([
        'work_registered',
        'work_registered',
        'work_updated',
        'work_updated',
      ]);
    } finally {
      await receiver.stop();
    }

    // the service's keys share one slot, and the queues spread over the masters
    const masters = admin.nodes('master');
    const tags = new Map<string, Set<string>>();
    for (const node of masters) {
      for (const k of await node.keys(`*${prefix}*`)) {
        const tag = /^\{([^}]+)\}/.exec(k)?.[1];
        expect(tag, `key ${k} has a hash tag`).to.be.a('string');
        tags.set(tag!, (tags.get(tag!) ?? new Set()).add(`${node.options.port}`));
      }
    }
    expect([...tags.keys()].sort()).to.include.members([
      prefix,
      `${prefix}:bull:chain`,
      `${prefix}:bull:webhooks`,
      `${prefix}:bull:prepare`,
    ]);
    for (const [tag, nodes] of tags) expect([...nodes], `keys of {${tag}}`).to.have.length(1);
    expect(new Set([...tags.values()].map((n) => [...n][0])).size).to.be.greaterThan(1);
  });

  it('publishes every live update through one node, so that two in turn reach a subscriber in that order', async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    const id = randomUUID();
    await app.context.db.transaction((trx) =>
      insertEndedTransaction(trx, { id, organizationId: org, apiKeyId: key.id, status: 'finalized' }),
    );
    const masters = admin.nodes('master');
    const published = () =>
      Promise.all(masters.map(async (node) => Number(/cmdstat_publish:calls=(\d+)/.exec(await node.info('commandstats'))?.[1] ?? 0)));
    const before = await published();
    for (let i = 0; i < 20; i++) await publishTransactionUpdates(app.context, [id]);
    const [row] = await findTransactions(app.context.db, [id]);
    await publishTransactionRows(app.context, [row!, row!, row!]);
    const added = (await published()).map((calls, i) => calls - before[i]!);
    // all of them through one master (the workers' own, had any published meanwhile, too), none through the others
    expect(added.filter((n) => n > 0)).to.have.length(1);
    expect(Math.max(...added)).to.be.at.least(23);
    await app.context.db('transactions').where({ id }).del();
  });

  it("checks every master's eviction policy at a production start, and names the one that may evict", async () => {
    const connection = createRedis(config.redis, 'worker', 'eviction-check-test');
    const masters = admin.nodes('master');
    const victim = masters[1]!;
    const saved = (await victim.config('GET', 'maxmemory*')) as string[];
    try {
      expect(await checkRedisKeepsKeys(connection, { production: true, log: testLogger() })).to.equal(undefined);
      await victim.config('SET', 'maxmemory', String(64 * 1024 ** 3));
      await victim.config('SET', 'maxmemory-policy', 'volatile-lru');
      const refused = await checkRedisKeepsKeys(connection, { production: true, log: testLogger() }).then(
        () => undefined,
        (err: Error) => err,
      );
      expect(refused?.message).to.include(
        `refusing to start: Redis may evict keys (${victim.options.host}:${victim.options.port}: maxmemory-policy volatile-lru`,
      );
      for (const other of masters.filter((m) => m !== victim)) expect(refused?.message).not.to.include(`:${other.options.port}:`);
    } finally {
      const value = (name: string) => saved[saved.indexOf(name) + 1]!;
      await victim.config('SET', 'maxmemory-policy', value('maxmemory-policy'));
      await victim.config('SET', 'maxmemory', value('maxmemory'));
      connection.disconnect();
    }
  });

  it('loses nothing confirmed when the master holding the chain queue and its replica die and come back empty', async () => {
    const api = await ApiPromise.create({ provider: new WsProvider(testServices().config.chains[0]!.wsUrl), noInitWarn: true });
    // what a maintenance worker process does (jobs/main.ts): schedule the housekeeping and keep it scheduled
    const unwatch = await keepMaintenanceScheduled(app.context);
    try {
      const org = await createOrg(app.context);
      const key = await createKey(app.context, org);
      const fromBlock = (await api.rpc.chain.getHeader()).number.toNumber();
      // confirmed while no chain worker takes them: their jobs wait in the chain queue's slot
      await app.context.queues.chain.pause();
      const ids: string[] = [];
      try {
        for (let i = 0; i < 5; i++) {
          const r = await register(app.url, key.token, initBody({ title: `Lost and found ${i}` }));
          expect(r.confirm.status).to.equal(202);
          ids.push(r.confirm.body.transaction_id);
        }
      } catch (err) {
        await app.context.queues.chain.resume();
        throw err;
      }
      const queue = bullPrefix(config.redis, 'chain');
      // its own five (the reconciler, every second here, may add a job for another test's unfinished transaction: the
      // database is shared)
      const states = await Promise.all(ids.map(async (id) => (await app.context.queues.chain.getJob(id))?.getState()));
      expect(states.filter((state) => state === 'waiting' || state === 'prioritized')).to.have.length(5);
      const logs = logsFromNow();
      // the shard goes, pause flag and jobs with it; it comes back empty and the queue runs again
      const lost = await cluster.killShardOf(`${queue}:chain:meta`);
      expect(lost, 'the master and its replica').to.have.length(2);
      for (const port of lost) await cluster.restartNode(port);
      await cluster.waitHealthy();
      await expectExactlyOnce(app.context, api, org, ids, fromBlock);
      expect(logs().some((line) => line.includes('reconciler re-enqueued stuck transactions'))).to.equal(true);
    } finally {
      unwatch();
      await api.disconnect();
    }
  });

  it('says it is not ready while the shard holding the service keys is away, and ready once it is back', async () => {
    const ports = await cluster.killShardOf(`${config.redis.prefix}:readyz`);
    expect(ports, 'the master and its replica').to.have.length(2);
    const down = await eventually(async () => {
      const r = await call(app.url, 'GET', '/readyz');
      return r.status === 503 ? r : undefined;
    }, '/readyz to answer 503');
    expect(down.body.checks.redis.ok).to.equal(false);
    expect(down.body.checks.postgres.ok).to.equal(true);
    for (const port of ports) await cluster.restartNode(port);
    await cluster.waitHealthy();
    await eventually(async () => ((await call(app.url, 'GET', '/readyz')).status === 200 ? true : undefined), '/readyz to answer 200');
  });
});
