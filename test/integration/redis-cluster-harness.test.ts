import { expect } from 'chai';
import { promises as fs } from 'node:fs';
import { Cluster, type Redis } from 'ioredis';
import { startRedisClusterOrSkip, type LocalRedisCluster } from '../helpers/redis-cluster';
import { createRedis, type Redis as ServiceRedis } from '../../shared/redis/client';
import { subscribe, type Subscription } from '../../shared/redis/subscriber';
import { configWith } from '../helpers/services';

const KEYS = 600;

/**
 * The harness's real Redis Cluster (test/helpers/redis-cluster.ts): three masters with a replica each on
 * 127.0.0.1, reached through ioredis's Cluster as the service reaches one. A master SIGKILLed after its
 * replica acknowledged its writes (WAIT) loses none of them to the failover, and comes back as a replica.
 */
describe('a local Redis Cluster (test harness)', function () {
  this.timeout(60_000);
  let cluster: LocalRedisCluster;
  let client: Cluster;

  before(async function () {
    cluster = await startRedisClusterOrSkip(this, { masters: 3, replicasPerMaster: 1 });
    client = new Cluster(cluster.nodes.map(hostPort));
  });

  after(async () => {
    client?.disconnect();
    await cluster?.stop();
  });

  it('serves all 16384 slots from three masters, each with one replica of its own', async () => {
    const nodes = await cluster.all();
    const masters = nodes.filter((n) => n.role === 'master');
    expect(masters).to.have.length(3);
    expect(nodes.filter((n) => n.alive)).to.have.length(6);
    for (const master of masters)
      expect(
        nodes.filter((n) => n.masterId === master.id),
        `replicas of ${master.port}`,
      ).to.have.length(1);
    expect(cluster.nodes).to.have.length(3);
    const info = String(await client.cluster('INFO'));
    expect(info).to.include('cluster_state:ok').and.include('cluster_slots_ok:16384');
  });

  it('keeps every write a replica acknowledged when its master is SIGKILLed, and takes the master back as a replica', async () => {
    const run = `k${Date.now().toString(36)}`;
    for (let i = 0; i < KEYS; i++) await client.set(`${run}:${i}`, `v${i}`);
    const masters = client.nodes('master');
    const held = await Promise.all(masters.map((m) => keysOn(m, run)));
    for (const [i, keys] of held.entries()) expect(keys.length, `keys on ${masters[i]!.options.port}`).to.be.greaterThan(0);
    expect(held.flat()).to.have.length(KEYS);

    const before = await cluster.all();
    const victim = before.filter((n) => n.role === 'master').sort((a, b) => a.port - b.port)[0]!;
    const heir = before.find((n) => n.masterId === victim.id)!;
    // WAIT on the very connection the Cluster client wrote through: the replica has everything sent on it.
    const victimConnection = masters.find((m) => m.options.port === victim.port)!;
    expect(await victimConnection.wait(1, 5000)).to.be.at.least(1);
    const lostWithIt = held[masters.indexOf(victimConnection)]!;

    await cluster.killMaster({ port: victim.port });
    await cluster.waitHealthy();
    const after = await cluster.all();
    expect(after.find((n) => n.port === heir.port)).to.include({ role: 'master', alive: true });
    expect(after.find((n) => n.port === victim.port)).to.include({ alive: false, pid: undefined });

    const values = await Promise.all(lostWithIt.map((key) => client.get(key)));
    expect(values).to.deep.equal(lostWithIt.map((key) => `v${key.split(':')[1]}`));
    await client.set(`${run}:after`, 'x');

    await cluster.restartNode(victim.port);
    await cluster.waitHealthy();
    const rejoined = (await cluster.all()).find((n) => n.port === victim.port)!;
    expect(rejoined).to.include({ alive: true, role: 'replica', masterId: heir.id });
    expect(rejoined.pid).to.be.a('number');
    expect(String(await client.cluster('INFO'))).to.include('cluster_state:ok');
  });

  it('stop() leaves no redis-server behind, restarted ones included, and no directory', async function () {
    const own = await startRedisClusterOrSkip(this, { masters: 3, replicasPerMaster: 0 });
    const started = await own.all();
    // With no replica the killed master's slots wait for it: restarting it on its config file heals the cluster.
    const victim = await own.killMaster(1);
    await own.restartNode(victim.port);
    await own.waitHealthy();
    const pids = [...new Set([...started, ...(await own.all())].map((n) => n.pid!))];
    expect(pids).to.have.length(4);
    expect(pids.filter(isRunning)).to.have.length(3);
    await own.stop();
    expect(pids.filter(isRunning)).to.deep.equal([]);
    await fs.access(own.dir).then(
      () => expect.fail(`${own.dir} is still there`),
      (error: NodeJS.ErrnoException) => expect(error.code).to.equal('ENOENT'),
    );
  });

  it('with a password, refuses a Cluster client without it and serves one that gives it, the service’s own through the URLs of REDIS_CLUSTER_NODES', async function () {
    const own = await startRedisClusterOrSkip(this, { masters: 3, replicasPerMaster: 0, password: 'cluster-secret' });
    const anonymous = new Cluster(own.nodes.map(hostPort), { clusterRetryStrategy: () => null });
    const authenticated = new Cluster(own.nodes.map(hostPort), { redisOptions: { password: 'cluster-secret' } });
    const refused: string[] = [];
    let service: ServiceRedis | undefined;
    // ioredis's ClusterAllFailedError carries the node's own reply as lastNodeError
    anonymous.on('error', (error: Error & { lastNodeError?: Error }) => refused.push(`${error.message} ${error.lastNodeError?.message}`));
    try {
      await anonymous.set('k', 'v').then(
        () => expect.fail('a client without the password was served'),
        (error: Error) => expect(error.message).to.equal('None of startup nodes is available'),
      );
      expect(refused.join('\n')).to.include('NOAUTH');
      await authenticated.set('k', 'v');
      expect(await authenticated.get('k')).to.equal('v');

      // the service's own connections, given the password the usual way: in REDIS_CLUSTER_NODES's URLs
      const { redis } = configWith({
        REDIS_URL: undefined,
        REDIS_CLUSTER_NODES: own.nodes.map((n) => `redis://:cluster-secret@${n}`).join(','),
      });
      service = createRedis(redis, 'worker', 'harness-password-test');
      expect(await service.get('k')).to.equal('v');
      const heard: string[] = [];
      let subscribed!: Subscription;
      const message = new Promise<void>((resolve) => {
        subscribed = subscribe(
          redis,
          'harness-password-sub',
          'harness-channel',
          { message: (m) => (heard.push(m), resolve()), resubscribing: () => undefined },
          service,
        );
      });
      try {
        expect(await subscribed.subscribed).to.equal(true);
        await service.publish('harness-channel', 'hello');
        await message;
        expect(heard).to.deep.equal(['hello']);
      } finally {
        subscribed.close();
      }
    } finally {
      anonymous.disconnect();
      authenticated.disconnect();
      service?.disconnect();
      await own.stop();
    }
  });
});

function hostPort(address: string): { host: string; port: number } {
  const [host = '', port = ''] = address.split(':');
  return { host, port: Number(port) };
}

async function keysOn(node: Redis, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
