import { expect } from 'chai';
import { call, expectError, logsFromNow, startApp, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { adminToken, operatorToken } from '../helpers/identity';
import { useStack } from '../helpers/workers';
import { initBody, register, settled } from '../helpers/registration';
import { configWith } from '../helpers/services';
import { safeUrl } from '../../shared/logger';

/** Least privilege within the roles (issue 18): what each role may do, and the defaults that hold it. */
describe('roles: operator, organization admin, key per scope, session per ref', function () {
  this.timeout(180_000);
  const stack = useStack({ env: { REDIS_PREFIX: `roles_${Date.now()}` } });
  let app: TestApp;
  before(() => (app = stack.app));

  describe('identity tokens', () => {
    it('an admin token without exp, or living longer than ADMIN_TOKEN_MAX_AGE, is refused with 401', async () => {
      const org = await createOrg(app.context);
      const list = (token: string) => call(app.url, 'GET', `/v1/organizations/${org}/api-keys`, { token });
      expect((await list(await adminToken({ organizationId: org }))).status).to.equal(200);
      expectError(await list(await adminToken({ organizationId: org, withoutExp: true })), 401, 'auth.unauthorized');
      // issued two hours ago, valid for ten more minutes: a lifetime past the hour allowed
      expectError(await list(await adminToken({ organizationId: org, issuedSecondsAgo: 7200 })), 401, 'auth.unauthorized');
      expectError(await list(await adminToken({ organizationId: org, expiresInSeconds: 7200 })), 401, 'auth.unauthorized');
    });

    it('an operator is not an organization admin, and an admin is not an operator', async () => {
      const org = await createOrg(app.context);
      expectError(
        await call(app.url, 'GET', `/v1/organizations/${org}/api-keys`, { token: await operatorToken({ organizationId: org }) }),
        403,
        'common.forbidden',
      );
      expectError(
        await call(app.url, 'GET', '/admin/queues/api/queues', { token: await adminToken({ organizationId: org }) }),
        403,
        'common.forbidden',
      );
      expectError(await call(app.url, 'GET', '/metrics', { token: await adminToken({ organizationId: org }) }), 403, 'common.forbidden');
      expect(
        (await call(app.url, 'GET', '/admin/queues/api/queues', { token: await operatorToken({ organizationId: org }) })).status,
      ).to.equal(200);
    });

    it('production refuses to start with no operator configured (neither the credential nor operator organizations)', () => {
      const production = { NODE_ENV: 'production', ALLOW_HTTP_WEBHOOKS: 'false', WEBHOOK_ALLOW_PRIVATE: 'false' };
      expect(() => configWith(production)).to.throw(/operators must be configured in production/);
      expect(() => configWith({ ...production, OPERATOR_ORG_IDS: 'ops-org' })).to.not.throw(/operators must be configured/);
      expect(() => configWith({ ...production, OPERATOR_CREDENTIAL: 'ops:a-long-enough-password' })).to.not.throw(
        /operators must be configured/,
      );
    });
  });

  describe('keys and sessions', () => {
    it('a key without works:read cannot mint a session (403 auth.insufficient_scope)', async () => {
      const org = await createOrg(app.context);
      const registerOnly = await createKey(app.context, org, ['works:register']);
      expectError(
        await call(app.url, 'POST', '/v1/sessions', { token: registerOnly.token, body: { external_user_ref: 'u1' } }),
        403,
        'auth.insufficient_scope',
      );
      const reader = await createKey(app.context, org, ['works:read']);
      expect((await call(app.url, 'POST', '/v1/sessions', { token: reader.token, body: { external_user_ref: 'u1' } })).status).to.equal(
        201,
      );
    });

    it("a session reads its own ref's work in detail (work, versions, creators), not another ref's, and writes nothing", async () => {
      const org = await createOrg(app.context, 10_000);
      const key = await createKey(app.context, org);
      const mine = await register(app.url, key.token, initBody({ external_user_ref: 'fan-1' }));
      const theirs = await register(app.url, key.token, initBody({ external_user_ref: 'fan-2' }));
      const [a, b] = [
        await settled(app.context, mine.confirm.body.transaction_id),
        await settled(app.context, theirs.confirm.body.transaction_id),
      ];
      const session = (await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'fan-1' } })).body
        .session_token as string;
      for (const path of ['', '/versions', '/creators']) {
        const own = await call(app.url, 'GET', `/v1/works/${a.ats_id}${path}?network=testnet`, { token: session });
        expect(own.status, `${path} ${own.text}`).to.equal(200);
        expectError(
          await call(app.url, 'GET', `/v1/works/${b.ats_id}${path}?network=testnet`, { token: session }),
          404,
          'common.not_found',
        );
      }
      expect((await call(app.url, 'GET', `/v1/works/${a.ats_id}?network=testnet`, { token: session })).body.external_user_ref).to.equal(
        'fan-1',
      );
      expectError(
        await call(app.url, 'POST', `/v1/works/${a.ats_id}/versions/init`, { token: session, body: { network: 'testnet', creators: [] } }),
        403,
        'auth.insufficient_scope',
      );
      expectError(await call(app.url, 'POST', '/v1/works/init', { token: session, body: initBody() }), 403, 'auth.insufficient_scope');
    });
  });

  describe('smaller doors', () => {
    it('idempotency compares the body as canonical JSON: the same JSON with another key order replays', async () => {
      const key = await createKey(app.context, await createOrg(app.context));
      const body = initBody();
      const reordered = Object.fromEntries(Object.entries(body).reverse());
      expect(JSON.stringify(reordered)).to.not.equal(JSON.stringify(body));
      const headers = { 'Idempotency-Key': `canon-${Date.now()}` };
      const first = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body, headers });
      const again = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: reordered, headers });
      expect(again.status).to.equal(200);
      expect(again.text).to.equal(first.text);
    });

    it('prepares take tokens from the organization bucket', async () => {
      const limited = configWith({ REDIS_PREFIX: app.context.config.redis.prefix, RATE_LIMIT_BURST: '2', RATE_LIMIT_PER_SECOND: '1' });
      const web = await startApp(limited);
      try {
        const key = await createKey(app.context, await createOrg(app.context));
        const init = await call(web.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
        expect(init.status).to.equal(200);
        const statuses = [];
        for (let i = 0; i < 3; i++)
          statuses.push(
            (await call(web.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: init.body.job_id } })).status,
          );
        // the init took one token, the first prepare the other (422: nothing uploaded), then the bucket is empty
        expect(statuses[0]).to.equal(422);
        expect(statuses.slice(1)).to.include(429);
      } finally {
        await web.close();
      }
    });

    it('the access log keeps only query values known to be harmless', async () => {
      const key = await createKey(app.context, await createOrg(app.context));
      const ours = logsFromNow();
      expect(safeUrl('/v1/works?network=testnet&api_key=wrk_live_secret&first=5&access_token=x')).to.equal(
        '/v1/works?network=testnet&api_key=[redacted]&first=5&access_token=[redacted]',
      );
      await call(app.url, 'GET', `/v1/works?network=testnet&api_key=${key.token}&sig=${key.token}`, { token: key.token });
      expect(ours().filter((l) => l.includes(key.token))).to.deep.equal([]);
      expect(ours().some((l) => l.includes('api_key=[redacted]'))).to.equal(true);
    });
  });
});
