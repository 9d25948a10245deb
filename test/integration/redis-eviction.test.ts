import { expect } from 'chai';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { checkRedisAtStart, checkRedisKeepsKeys, evictionNow, evictionOfServers, RedisEvicts } from '../../shared/redis/eviction';
import { startPrivateRedis, type RedisHandle } from '../../shared/dev/embedded/redis';
import { startJobs } from '../../jobs/main';
import { startWeb } from '../../web/main';
import { eventually, logsFromNow, testLogger } from '../helpers/app';
import { REASON_LOGGED } from '../../web/readiness';
import { testServices } from '../helpers/services';
import { spawnWeb } from '../helpers/web-process';
import type { Config, Env } from '../../shared/config';
import { createLogger } from '../../shared/logger';

/** What a start that was refused threw (undefined when it started: it is stopped again). */
const refusal = (start: Promise<{ stop(): Promise<void> }>): Promise<unknown> =>
  start.then(
    async (running) => {
      await running.stop();
      return undefined;
    },
    (err: unknown) => err,
  );

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('the eviction check at a process start: the run’s own Redis', () => {
  it("reads the server's maxmemory-policy and maxmemory as CONFIG GET has them", async () => {
    const admin = new Redis(testServices().config.redis.url);
    try {
      const config = Object.fromEntries(
        ((await admin.config('GET', 'maxmemory*')) as string[]).flatMap((v, i, all) => (i % 2 ? [] : [[v, all[i + 1]]])) as [
          string,
          string,
        ][],
      );
      const [server] = await evictionOfServers(admin);
      expect(server).to.include({ policy: config['maxmemory-policy'], maxmemory: Number(config.maxmemory) });
    } finally {
      admin.disconnect();
    }
  });
});

/**
 * The check a web or worker process makes of its Redis server at start (shared/redis/eviction.ts), against a
 * redis-server of the test's own (its settings changed per test, nothing shared with other runs), skipped where
 * there is no redis-server on PATH.
 */
describe('a process start on a Redis that may evict keys', function () {
  this.timeout(60_000);
  let server: RedisHandle;
  let admin: Redis;
  let hostPort: string;

  const evicting = async (policy = 'allkeys-lru') => {
    await admin.config('SET', 'maxmemory', String(64 * 1024 ** 3));
    await admin.config('SET', 'maxmemory-policy', policy);
  };
  /** The service's configuration on the test's server, in `env`. */
  const on = (env: Config['env']): Config => ({
    ...testServices().config,
    env,
    redis: { ...testServices().config.redis, url: server.url },
  });

  before(async function () {
    try {
      server = await startPrivateRedis();
    } catch (err) {
      console.log(`      skipped: ${(err as Error).message}`);
      this.skip();
    }
    admin = new Redis(server.url);
    hostPort = new URL(server.url).host;
  });
  // the server's defaults: no maxmemory, noeviction
  afterEach(async () => {
    await admin?.config('SET', 'maxmemory-policy', 'noeviction');
    await admin?.config('SET', 'maxmemory', '0');
  });
  after(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  it('starts a production web and worker on a server that keeps keys', async () => {
    expect(await refusal(startWeb(on('production'), testLogger()))).to.equal(undefined);
    expect(await refusal(startJobs(on('production'), testLogger()))).to.equal(undefined);
  });

  for (const policy of ['allkeys-lru', 'volatile-ttl'])
    it(`refuses to start a production web or worker under ${policy}, naming the server and its policy`, async () => {
      await evicting(policy);
      for (const start of [startWeb, startJobs]) {
        const refused = await refusal(start(on('production'), testLogger()));
        expect(refused).to.be.instanceOf(RedisEvicts);
        expect((refused as Error).message).to.match(
          new RegExp(
            `^refusing to start: Redis may evict keys \\(${escaped(hostPort)}: maxmemory-policy ${policy}, maxmemory 68719476736\\)`,
          ),
        );
      }
    });

  it("turns a production web's /readyz to 503 once its server may evict keys, and back to 200 once it keeps them", async () => {
    // the web's own log, so that no other test's lines get in
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(...String(chunk).split('\n').filter(Boolean));
        done();
      },
    });
    const web = await startWeb(on('production'), createLogger('debug', sink));
    try {
      const ready = async () => {
        const reply = await fetch(`${web.url}/readyz`);
        return { status: reply.status, body: (await reply.json()) as { checks: Record<string, { ok: boolean; error?: string }> } };
      };
      // ready once its connections are (the start does not wait for them)
      await eventually(async () => ((await ready()).status === 200 ? true : undefined), 'the web to be ready');
      const from = lines.length;
      const readinessLogs = () =>
        lines
          .slice(from)
          .map((line) => JSON.parse(line) as { level: number; msg: string; check?: string; reason?: string; was?: string })
          .filter((line) => line.msg.startsWith('readiness check'))
          .map(({ level, msg, check, reason, was }) => ({ level, msg, check, reason, was }));
      const reason = (policy: string) =>
        `Redis may evict keys (${hostPort}: maxmemory-policy ${policy}, maxmemory 68719476736): the service needs maxmemory-policy noeviction (or no maxmemory), as jobs, revocations and idempotency records must not be dropped`;
      await evicting('volatile-lru');
      // the answer is open to anyone: it names the failing check, and its reason (a host and port, the server's
      // memory settings) goes to the log, once while it stays the same
      for (let i = 0; i < 2; i++) {
        const refused = await ready();
        expect(refused.status).to.equal(503);
        expect(refused.body.checks.redis).to.deep.equal({ ok: false, error: REASON_LOGGED });
        expect(refused.body.checks.postgres).to.deep.equal({ ok: true });
        expect(JSON.stringify(refused.body)).not.to.include(hostPort);
      }
      const failing = {
        level: 40,
        msg: 'readiness check failing: /readyz answers 503',
        check: 'redis',
        reason: reason('volatile-lru'),
        was: undefined,
      };
      expect(readinessLogs()).to.deep.equal([failing]);
      // another reason within the minute is not logged again (a reason can name an address that rotates)
      await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
      expect((await ready()).status).to.equal(503);
      expect(readinessLogs()).to.deep.equal([failing]);

      // requests arriving while the dependencies are asked share that one asking: Redis paused, 20 /readyz at
      // once ask its INFO once
      const infoCalls = async () => Number(/cmdstat_info:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
      const before = await infoCalls();
      await admin.client('PAUSE', '300', 'ALL');
      const answers = await Promise.all(Array.from({ length: 20 }, ready));
      expect(answers.map((a) => a.status)).to.deep.equal(Array(20).fill(503));
      // less the reading of `before` itself
      expect((await infoCalls()) - before - 1).to.equal(1);

      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      await eventually(async () => ((await ready()).status === 200 ? true : undefined), 'the web to be ready again');
      expect(readinessLogs()).to.deep.equal([
        failing,
        { level: 30, msg: 'readiness check passing again', check: 'redis', reason: undefined, was: reason('allkeys-lru') },
      ]);
    } finally {
      await web.stop();
    }
  });

  it('tells a running web nothing while the server keeps its keys, and why once it may evict them', async () => {
    expect(await evictionNow(admin)).to.equal(undefined);
    await admin.config('SET', 'maxmemory', String(64 * 1024 ** 3)); // a limit alone, under noeviction: keys are kept
    expect(await evictionNow(admin)).to.equal(undefined);
    await admin.config('SET', 'maxmemory-policy', 'allkeys-random');
    expect(await evictionNow(admin)).to.match(
      new RegExp(
        `^Redis may evict keys \\(${escaped(hostPort)}: maxmemory-policy allkeys-random, maxmemory 68719476736\\): the service needs`,
      ),
    );
  });

  it('leaves a development web ready on such a server (its start warned)', async () => {
    await evicting();
    const web = await startWeb(on('development'), testLogger());
    try {
      const ready = await eventually(async () => {
        const reply = await fetch(`${web.url}/readyz`);
        return reply.status === 200 ? ((await reply.json()) as { checks: { redis: unknown } }) : undefined;
      }, 'the web to be ready');
      expect(ready.checks.redis).to.deep.equal({ ok: true });
    } finally {
      await web.stop();
    }
  });

  it('tells a running web that the settings could not be read when its one server is away', async () => {
    const away = new Redis('redis://127.0.0.1:1', { enableOfflineQueue: false, retryStrategy: () => null });
    away.on('error', () => undefined);
    try {
      expect(await evictionNow(away)).to.match(/^could not read Redis's eviction settings: 127\.0\.0\.1:1: .+: the service needs/);
    } finally {
      away.disconnect();
    }
  });

  it('elsewhere, says in a warning that the server may evict, and starts', async () => {
    await evicting();
    const logs = logsFromNow();
    await checkRedisKeepsKeys(admin, { production: false, log: testLogger() });
    const warning = logs().find((line) => line.includes('Redis may evict keys'));
    expect(warning).to.include('"level":40').and.include('allkeys-lru');
    expect(await refusal(startWeb(on('development'), testLogger()))).to.equal(undefined);
  });

  it('refuses a production start when the settings cannot be read within the wait, rather than start unchecked', async () => {
    const nowhere = { ...on('production'), redis: { ...on('production').redis, url: 'redis://127.0.0.1:1' } };
    const refused = await checkRedisAtStart(nowhere, testLogger(), 300).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).to.be.instanceOf(RedisEvicts);
    expect((refused as Error).message).to.match(/^refusing to start: could not read Redis's eviction settings: no answer within 300 ms/);
  });

  it('a production web process (as the Procfile starts it) exits 1 on such a server, and starts once it keeps keys', async () => {
    const env: Env = {
      ...testServices().env,
      REDIS_URL: server.url,
      NODE_ENV: 'production',
      OPERATOR_ORG_IDS: 'ops',
      DEV_IDP_KEY_FILE: undefined,
      WEBHOOK_ALLOW_PRIVATE: undefined,
    };
    await evicting();
    const refused = await spawnWeb(env).then(
      (web) => {
        web.kill();
        return undefined;
      },
      (err: Error) => err,
    );
    expect(refused?.message)
      .to.match(/the web exited \(1\) before logging "web listening"/)
      .and.match(/refusing to start: Redis may evict keys/);
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    const web = await spawnWeb(env);
    web.kill('SIGTERM');
    expect((await web.exited).code).to.equal(0);
  });
});

/** A server whose INFO is disabled, as some managed offerings do: what it keeps cannot be known. */
describe('a process start on a Redis that will not say', function () {
  this.timeout(30_000);
  let server: RedisHandle;

  before(async function () {
    try {
      server = await startPrivateRedis(undefined, ['--rename-command', 'INFO', '']);
    } catch (err) {
      console.log(`      skipped: ${(err as Error).message}`);
      this.skip();
    }
  });
  after(() => server?.stop());

  it('refuses a production start, and warns elsewhere (the settings cannot be read)', async () => {
    const config = { ...testServices().config, redis: { ...testServices().config.redis, url: server.url } };
    const refused = await checkRedisAtStart({ ...config, env: 'production' }, testLogger(), 2000).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).to.be.instanceOf(RedisEvicts);
    // ioredis's own ready check asks INFO too: such a connection never gets ready, and the wait ends it
    expect((refused as Error).message).to.match(/^refusing to start: could not read Redis's eviction settings: no answer within 2000 ms/);
    const logs = logsFromNow();
    const redis = new Redis(server.url);
    redis.on('error', () => undefined); // its ready check's refused INFO, at each reconnection
    try {
      await checkRedisKeepsKeys(redis, { production: false, log: testLogger(), waitMs: 1000 });
    } finally {
      redis.disconnect();
    }
    expect(logs().find((line) => line.includes("could not read Redis's eviction settings"))).to.include('"level":40');
  });

  it('tells a running web that the settings could not be read, naming the server whose INFO is refused', async () => {
    // without the ready check (which asks INFO) the connection opens, and only INFO itself is refused
    const redis = new Redis(server.url, { enableReadyCheck: false });
    try {
      expect(await evictionNow(redis)).to.match(
        new RegExp(
          `^could not read Redis's eviction settings: ${escaped(new URL(server.url).host)}: ERR unknown command.*: the service needs`,
        ),
      );
    } finally {
      redis.disconnect();
    }
  });
});
