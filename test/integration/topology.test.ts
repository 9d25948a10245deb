import { expect } from 'chai';
import nock from 'nock';
import type { Socket as IoSocket } from 'socket.io-client';
import type { Env } from '../../shared/config';
import { openResources, type Resources } from '../../shared/resources';
import { call, eventually, testLogger } from '../helpers/app';
import { startBalancer, type Balancer } from '../helpers/balancer';
import { createKey, createOrg, type TestKey } from '../helpers/factories';
import { connect, connectSocketIo, STEPS, type Client, type Frame } from '../helpers/live';
import { startRedisClusterOrSkip, type LocalRedisCluster } from '../helpers/redis-cluster';
import { initBody, register } from '../helpers/registration';
import { configWith, testServices } from '../helpers/services';
import { spawnWeb, type WebProcess } from '../helpers/web-process';
import { spawnWorker, type WorkerProcess } from '../helpers/workers';

/**
 * Many processes, one service (issue 21): two web processes and three workers (chain, webhooks, the rest), as
 * the Procfile runs them, on a Redis Cluster, behind a connection-level balancer that follows `/readyz`.
 */
describe('many processes on a Redis Cluster', function () {
  this.timeout(300_000);
  const prefix = `topology_${Date.now().toString(36)}`;
  let cluster: LocalRedisCluster;
  let env: Env;
  let ctx: Resources;
  let key: TestKey;
  let balancer: Balancer;
  const webs: WebProcess[] = [];
  const workers: WorkerProcess[] = [];

  // nock (loaded for the identity provider's JWKS) puts its own socket under every HTTP request of this process,
  // WebSocket upgrades and socket.io's included: these clients talk to real processes, so it is off meanwhile
  before(() => nock.restore());
  after(() => nock.activate());

  before(async function () {
    cluster = await startRedisClusterOrSkip(this, { masters: 3, replicasPerMaster: 1 });
    const overrides: Env = {
      REDIS_URL: undefined,
      REDIS_CLUSTER_NODES: cluster.nodes.join(','),
      REDIS_PREFIX: prefix,
      SHUTDOWN_DRAIN_MS: '1500',
      LOG_LEVEL: 'info',
    };
    env = Object.fromEntries(Object.entries({ ...testServices().env, ...overrides }).filter(([, v]) => v !== undefined));
    ctx = openResources(configWith(overrides), testLogger(), 'dev');
    key = await createKey(ctx, await createOrg(ctx, 10_000));
    for (const queues of ['chain', 'webhooks', 'prepare,maintenance,certificates,webhooks-dead'])
      workers.push(spawnWorker({ ...env, WORKER_QUEUES: queues }));
    webs.push(...(await Promise.all([spawnWeb(env), spawnWeb(env)])));
    balancer = await startBalancer();
    for (const web of webs) balancer.add(web.url);
    await Promise.all(webs.map((web) => balancer.until(web.url, true)));
    for (const queue of ['prepare', 'chain', 'webhooks'] as const)
      await eventually(async () => ((await ctx.queues[queue].getWorkersCount()) > 0 ? true : undefined), `a ${queue} worker`);
  });

  after(async () => {
    await balancer?.close();
    for (const p of [...webs, ...workers]) p.kill('SIGTERM');
    await Promise.all([...webs, ...workers].map((p) => p.exited));
    await ctx?.close();
    await cluster?.stop();
  });

  /** A registration confirmed while no chain job runs: it waits at `validating` until `go`. */
  async function held(base: string): Promise<{ id: string; go: () => Promise<void> }> {
    await ctx.queues.chain.pause();
    try {
      const r = await register(base, key.token, initBody());
      expect(r.confirm.status).to.equal(202);
      return { id: r.confirm.body.transaction_id, go: () => ctx.queues.chain.resume() };
    } catch (err) {
      await ctx.queues.chain.resume();
      throw err;
    }
  }

  /** socket.io frames of one transaction, from its `subscribe` answer on, re-subscribing on every reconnect. */
  function follow(socket: IoSocket, id: string): { frames: Frame[]; done: Promise<void> } {
    const frames: Frame[] = [];
    const done = new Promise<void>((resolve) => {
      const take = (frame: Frame) => {
        frames.push(frame);
        if (frame.transaction?.is_complete) resolve();
      };
      socket.on('update', take);
      const subscribe = () =>
        void socket
          .timeout(10_000)
          .emitWithAck('subscribe', id)
          .then(take, () => undefined);
      socket.on('connect', subscribe);
      if (socket.connected) subscribe();
    });
    return { frames, done };
  }

  it('a WebSocket client on web A and a socket.io client on web B see every step the workers make', async () => {
    const [a, b] = webs as [WebProcess, WebProcess];
    const tx = await held(a.url);
    const ws = await connect(a.url, `/v1/ws/transactions/${tx.id}`, key.token);
    const io = await connectSocketIo(b.url, key.token, { transports: ['websocket'] });
    try {
      const followed = follow(io, tx.id);
      await eventually(async () => (followed.frames.length > 0 ? true : undefined), 'the socket.io subscription');
      await tx.go();
      expect((await ws.closed).code).to.equal(1000);
      await followed.done;
      expect(ws.frames.map((f) => f.transaction.current_step)).to.deep.equal(STEPS);
      expect(followed.frames.map((f) => f.transaction.current_step)).to.deep.equal(STEPS);
      const rest = await call(a.url, 'GET', `/v1/transactions/${tx.id}`, { token: key.token });
      expect(followed.frames.at(-1)!.transaction).to.deep.equal(rest.body);
    } finally {
      io.close();
    }
  });

  it('a rolling restart of the webs drops no request and no update a reconnecting client cannot recover', async () => {
    const tx = await held(balancer.url);

    // a steady stream of requests through the balancer, four at a time
    const answers: { status: number | string; at: number }[] = [];
    let streaming = true;
    const stream = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (streaming) {
          const status = await fetch(`${balancer.url}/v1/transactions/${tx.id}`, {
            headers: { authorization: `Bearer ${key.token}` },
          }).then(
            async (r) => (await r.arrayBuffer(), r.status),
            (err: Error) => `${err.message} ${String((err.cause as Error | undefined)?.message ?? '')}`,
          );
          answers.push({ status, at: Date.now() });
        }
      }),
    );

    // live clients: two plain WebSockets, one on each web, that reconnect through the balancer when told to,
    // and socket.io through the balancer. The workers go on with the transaction as soon as the first web
    // restarted tells its client to reconnect, so updates are published while that client is moving.
    const wsClients: Client[][] = [[], []];
    let toldToReconnect!: () => void;
    const firstReconnect = new Promise<void>((resolve) => (toldToReconnect = resolve));
    const openWs = async (sessions: Client[], base: string) => {
      const client = await connect(base, `/v1/ws/transactions/${tx.id}`, key.token);
      sessions.push(client);
      void client.closed.then(({ code }) => {
        if (code !== 1012) return;
        toldToReconnect();
        void openWs(sessions, balancer.url);
      });
    };
    for (const [i, sessions] of wsClients.entries()) await openWs(sessions, webs[i]!.url);
    const io = await connectSocketIo(balancer.url, key.token, { reconnection: true, reconnectionDelay: 100, transports: ['websocket'] });
    let reconnects = 0;
    io.io.on('reconnect', () => reconnects++);
    const followed = follow(io, tx.id);
    await eventually(async () => (followed.frames.length > 0 ? true : undefined), 'the socket.io subscription');

    try {
      // each web in turn: SIGTERM, its replacement started and ready, then the next
      const going = firstReconnect.then(() => tx.go());
      for (const old of [...webs]) {
        const stopping = answers.length;
        old.kill('SIGTERM');
        await balancer.until(old.url, false);
        const fresh = await spawnWeb(env);
        balancer.add(fresh.url);
        await balancer.until(fresh.url, true);
        expect(await old.exited).to.deep.equal({ code: 0, signal: null });
        balancer.remove(old.url);
        webs.splice(webs.indexOf(old), 1, fresh);
        expect(answers.length, 'requests answered while the web restarted').to.be.greaterThan(stopping);
      }
      await going;
      await followed.done;
      for (const sessions of wsClients)
        await eventually(async () => (sessions.at(-1)!.frames.at(-1)?.transaction.is_complete ? true : undefined), 'a WebSocket to end');
    } finally {
      streaming = false;
      await stream;
      io.close();
    }

    expect(answers.filter((a) => a.status !== 200)).to.deep.equal([]);
    expect(answers.length).to.be.greaterThan(100);
    // every client recovered: each plain socket a restart closed was told to reconnect (one at least was), and
    // each client's last socket ended on the final state
    const sessions = wsClients.flat();
    expect(sessions.length).to.be.greaterThan(wsClients.length);
    for (const client of wsClients) {
      for (const session of client.slice(0, -1)) expect((await session.closed).code).to.equal(1012);
      expect((await client.at(-1)!.closed).code).to.equal(1000);
    }
    expect(reconnects).to.be.greaterThan(0);
    const rest = await call(balancer.url, 'GET', `/v1/transactions/${tx.id}`, { token: key.token });
    expect(rest.body).to.include({ status: 'finalized', is_complete: true });
    for (const client of wsClients) expect(client.at(-1)!.frames.at(-1)!.transaction).to.deep.equal(rest.body);
    expect(followed.frames.at(-1)!.transaction).to.deep.equal(rest.body);
    // a reconnecting client starts from the state of the moment: each session's first frame is `connected`
    for (const session of sessions) expect(session.frames[0]!.type).to.equal('connected');
  });
});
