import { expect } from 'chai';
import { startApp, call, expectError, logsFromNow } from '../helpers/app';
import { configWith } from '../helpers/services';
import { startPrivateRedis } from '../../shared/dev/embedded/redis';
import { createOrg, createKey } from '../helpers/factories';
import { initBody } from '../helpers/registration';
import { scrape } from '../helpers/prometheus';
import { operatorToken } from '../helpers/identity';
import { REASON_LOGGED } from '../../web/readiness';
import { randomUUID } from 'node:crypto';

describe('readiness when a dependency is gone', () => {
  it('turns /readyz to 503 naming Redis, and API calls to 503, when Redis stops', async () => {
    const redis = await startPrivateRedis();
    const app = await startApp(configWith({ REDIS_URL: redis.url }));
    try {
      expect((await call(app.url, 'GET', '/readyz')).status).to.equal(200);
      const key = await createKey(app.context, await createOrg(app.context));
      await redis.stop();
      const init = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
      expectError(init, 503, 'common.service_unavailable');
      expect(init.headers.get('retry-after')).to.equal('5');
      const reply = await call(app.url, 'GET', '/readyz');
      expect(reply.status).to.equal(503);
      expect(reply.body.status).to.equal('unavailable');
      expect(reply.body.checks.redis.ok).to.equal(false);
      expect(reply.body.checks.postgres.ok).to.equal(true);
      expect(reply.body.checks['chain:testnet'].ok).to.equal(true);
      expect((await call(app.url, 'GET', '/healthz')).status).to.equal(200);
    } finally {
      await app.close();
      await redis.stop();
    }
  });

  it('answers 503 common.service_unavailable when PostgreSQL is unreachable', async () => {
    const healthy = await startApp();
    const key = await createKey(healthy.context, await createOrg(healthy.context));
    await healthy.close();
    const logs = logsFromNow();
    // knex's own warnings went to console.log as free text (coloured): they are lines of the JSON log now
    const consoleLines: string[] = [];
    const consoleLog = console.log;
    console.log = (...args: unknown[]) => void consoleLines.push(args.map(String).join(' '));
    const app = await startApp(configWith({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' })).finally(
      () => (console.log = consoleLog),
    );
    console.log = (...args: unknown[]) => void consoleLines.push(args.map(String).join(' '));
    try {
      const reply = await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'u' } });
      expectError(reply, 503, 'common.service_unavailable');
      expect(reply.headers.get('retry-after')).to.equal('5');
      const ready = await call(app.url, 'GET', '/readyz');
      expect(ready.status).to.equal(503);
      expect(ready.body.checks.postgres.ok).to.equal(false);
      // outside production the reason stays in the answer (a production web logs it instead: redis-eviction.test.ts)
      expect(ready.body.checks.postgres.error).to.be.a('string').and.not.equal(REASON_LOGGED);
      expect(ready.body.checks.redis.ok).to.equal(true);
      // operators alert on each check's latest result
      const metrics = await scrape(app.url, { authorization: `Bearer ${await operatorToken({ organizationId: randomUUID() })}` });
      expect(metrics.value('works_api_readiness_check_ok', { check: 'postgres' })).to.equal(0);
      expect(metrics.value('works_api_readiness_check_ok', { check: 'redis' })).to.equal(1);
      const knexLines = logs()
        .map((line) => JSON.parse(line) as { level: number; component?: string; msg: string })
        .filter((line) => line.component === 'knex');
      expect(knexLines.length).to.be.greaterThan(0);
      for (const line of knexLines)
        expect(line)
          .to.include({ level: 40 })
          .and.to.have.property('msg')
          .that.matches(/^Acquire connection error: Error: connect ECONNREFUSED 127\.0\.0\.1:1\n/);
      expect(consoleLines.filter((line) => line.includes('Acquire connection error'))).to.deep.equal([]);
    } finally {
      console.log = consoleLog;
      await app.close();
    }
  });
});
