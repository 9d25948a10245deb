import { expect } from 'chai';
import { startApp, call, expectError, type TestApp } from '../helpers/app';
import { createOrg, createKey, suspendOrg } from '../helpers/factories';
import { adminToken } from '../helpers/identity';
import { initBody } from '../helpers/registration';
import { configWith, testServices } from '../helpers/services';
import { setOrganizationStatus } from '../../shared/organizations/service';

/**
 * Keys are checked against their records in Redis (shared/api-keys/key-cache.ts): once a key is known there,
 * a request needs no PostgreSQL at all, and a revocation or a suspension made through any process holds from
 * the very next request in every other.
 */
describe('API key records in Redis', () => {
  let app: TestApp;
  // a second web process whose PostgreSQL is unreachable: whatever it answers, it answered without PostgreSQL
  let noDatabase: TestApp;
  before(async () => {
    app = await startApp();
    const url = testServices().config.database.url.replace(/\/\/([^/]*)\//, '//127.0.0.1:1/');
    noDatabase = await startApp(configWith({ DATABASE_URL: url, DATABASE_POOL_MAX: '1' }));
  });
  after(async () => {
    await noDatabase?.close();
    await app?.close();
  });

  const init = (base: string, token: string) => call(base, 'POST', '/v1/works/init', { token, body: initBody() });

  it('an init with a known key reads no PostgreSQL; a revocation elsewhere holds from the next request', async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    // unknown to Redis yet: the process without PostgreSQL cannot check it
    expect((await init(noDatabase.url, key.token)).status).to.equal(503);
    // known once a process with PostgreSQL has checked it
    expect((await init(app.url, key.token)).status).to.equal(200);
    const served = await init(noDatabase.url, key.token);
    expect(served.status, served.text).to.equal(200);
    expect(served.body.upload_url).to.be.a('string');

    const admin = await adminToken({ organizationId: org });
    expect((await call(app.url, 'DELETE', `/v1/organizations/${org}/api-keys/${key.id}`, { token: admin })).status).to.equal(204);
    expectError(await init(noDatabase.url, key.token), 401, 'auth.unauthorized');
    expectError(await init(app.url, key.token), 401, 'auth.unauthorized');
  });

  it('a suspension and an activation hold from the next request in another process', async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    expect((await init(app.url, key.token)).status).to.equal(200);
    expect((await init(noDatabase.url, key.token)).status).to.equal(200);
    await suspendOrg(app.context, org);
    expectError(await init(noDatabase.url, key.token), 403, 'organization.inactive');
    await setOrganizationStatus(app.context, org, 'active');
    expect((await init(noDatabase.url, key.token)).status).to.equal(200);
  });

  it('a key revoked before Redis knew it is refused, and its record says so', async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    const admin = await adminToken({ organizationId: org });
    expect((await call(app.url, 'DELETE', `/v1/organizations/${org}/api-keys/${key.id}`, { token: admin })).status).to.equal(204);
    expectError(await init(app.url, key.token), 401, 'auth.unauthorized');
    expectError(await init(noDatabase.url, key.token), 401, 'auth.unauthorized');
  });

  it('a token of the bucket is taken with the key check: an invalid request takes none, a valid one past the burst is refused', async () => {
    const limited = await startApp(configWith({ RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '2' }));
    try {
      const org = await createOrg(app.context);
      const key = await createKey(app.context, org);
      // the key made known to Redis by a request through a process whose burst is the default one
      expect((await init(app.url, key.token)).status).to.equal(200);
      for (let i = 0; i < 3; i++) {
        expectError(
          await call(limited.url, 'POST', '/v1/works/init', { token: key.token, body: { network: 'testnet' } }),
          422,
          'common.validation_failed',
        );
      }
      expect((await init(limited.url, key.token)).status).to.equal(200);
      expect((await init(limited.url, key.token)).status).to.equal(200);
      const refused = await init(limited.url, key.token);
      expectError(refused, 429, 'organization.rate_limited');
      expect(Number(refused.headers.get('retry-after'))).to.be.at.least(1);
    } finally {
      await limited.close();
    }
  });
});
