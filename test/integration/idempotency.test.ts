import { expect } from 'chai';
import { startApp, type TestApp } from '../helpers/app';
import { IdempotencyStore } from '../../shared/idempotency/service';

describe('IdempotencyStore', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  it('keeps an in-flight claim only briefly, so a request that died frees its key', async () => {
    const prefix = `${app.context.config.redis.prefix}:idem-test-${Date.now()}`;
    const store = new IdempotencyStore(app.context.redis, prefix, 86_400, 30);
    let ttlDuringRun = -1;
    let keyName = '';
    await store.run('key-1', 'k', 'fp', async () => {
      keyName = (await app.context.redis.keys(`${prefix}:idem:key-1:*`))[0] ?? '';
      ttlDuringRun = await app.context.redis.ttl(keyName);
      return { status: 200, body: '{}' };
    });
    expect(ttlDuringRun).to.be.within(1, 30);
    expect(await app.context.redis.ttl(keyName)).to.be.greaterThan(86_000);
  });

  it('forgets a failed request, so the caller may retry with the same key', async () => {
    const store = new IdempotencyStore(app.context.redis, `${app.context.config.redis.prefix}:idem-fail-${Date.now()}`, 86_400);
    await store.run('key-2', 'k', 'fp', async () => Promise.reject(new Error('boom'))).catch(() => undefined);
    const replay = await store.run('key-2', 'k', 'fp', async () => ({ status: 200, body: '{"ok":true}' }));
    expect(replay).to.deep.equal({ status: 200, body: '{"ok":true}' });
  });
});
