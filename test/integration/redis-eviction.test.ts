import { expect } from 'chai';
import { Redis } from 'ioredis';
import { checkRedisAtStart, checkRedisKeepsKeys, evictionOfServers, RedisEvicts } from '../../shared/redis/eviction';
import { startJobs } from '../../jobs/main';
import { startWeb } from '../../web/main';
import { logsFromNow, testLogger } from '../helpers/app';
import { testServices } from '../helpers/services';
import { spawnWeb } from '../helpers/web-process';
import type { Config, Env } from '../../shared/config';

/**
 * The check a web or worker process makes of its Redis server at start (shared/redis/eviction.ts), against the
 * run's real server: its eviction settings are changed for a test and put back after (a maxmemory far above
 * what the server holds, so that nothing is evicted meanwhile).
 */
describe('a process start on a Redis that may evict keys', function () {
  this.timeout(60_000);
  let admin: Redis;
  let saved: { policy: string; maxmemory: string };

  const configGet = async (name: string) => String(((await admin.config('GET', name)) as string[])[1]);
  const evicting = async () => {
    await admin.config('SET', 'maxmemory', String(64 * 1024 ** 3));
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
  };
  const restore = async () => {
    await admin.config('SET', 'maxmemory-policy', saved.policy);
    await admin.config('SET', 'maxmemory', saved.maxmemory);
  };
  const production = (): Config => ({ ...testServices().config, env: 'production' });

  before(async () => {
    admin = new Redis(testServices().config.redis.url);
    saved = { policy: await configGet('maxmemory-policy'), maxmemory: await configGet('maxmemory') };
  });
  afterEach(restore);
  after(() => admin.disconnect());

  it("reads the server's own maxmemory-policy and maxmemory", async () => {
    await evicting();
    const [server] = await evictionOfServers(admin);
    expect(server).to.include({ policy: 'allkeys-lru', maxmemory: 64 * 1024 ** 3, evicts: true });
    await restore();
    const [again] = await evictionOfServers(admin);
    expect(again).to.include({ policy: saved.policy, maxmemory: Number(saved.maxmemory) });
  });

  it('refuses to start a production web or worker, naming the server and its policy', async () => {
    await evicting();
    for (const start of [() => startWeb(production(), testLogger()), () => startJobs(production(), testLogger())]) {
      const refused = await start().then(
        async (running) => {
          await running.stop();
          return undefined;
        },
        (err: unknown) => err,
      );
      expect(refused).to.be.instanceOf(RedisEvicts);
      expect((refused as Error).message).to.match(
        /^refusing to start: Redis may evict keys \(127\.0\.0\.1:\d+: maxmemory-policy allkeys-lru, maxmemory 68719476736\)/,
      );
    }
  });

  it('elsewhere, says in a warning that the server may evict, and starts', async () => {
    await evicting();
    const logs = logsFromNow();
    await checkRedisKeepsKeys(admin, { production: false, log: testLogger() });
    const warning = logs().find((line) => line.includes('Redis may evict keys'));
    expect(warning).to.include('"level":40').and.include('allkeys-lru');
    const web = await startWeb({ ...testServices().config, env: 'development' }, testLogger());
    await web.stop();
  });

  it('refuses a production start when the settings cannot be read within the wait, rather than start unchecked', async () => {
    const config = {
      ...testServices().config,
      env: 'production' as const,
      redis: { ...testServices().config.redis, url: 'redis://127.0.0.1:1' },
    };
    const refused = await checkRedisAtStart(config, testLogger(), 300).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).to.be.instanceOf(RedisEvicts);
    expect((refused as Error).message).to.match(/^refusing to start: could not read Redis's eviction settings within 300 ms \(not ready/);
  });

  it('a production web process (as the Procfile starts it) exits 1 on such a server, and starts once it keeps keys', async () => {
    const env: Env = {
      ...testServices().env,
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
    await restore();
    const web = await spawnWeb(env);
    web.kill('SIGTERM');
    expect((await web.exited).code).to.equal(0);
  });
});
