import { expect } from 'chai';
import { generateKeyPair } from 'jose';
import { startApp, call, eventually, expectError, type TestApp } from '../helpers/app';
import { createOrg, createKey, suspendOrg } from '../helpers/factories';
import { adminToken, IDP } from '../helpers/identity';
import { generateToken } from '../../shared/api-keys/token';

describe('authentication and authorization (docs/api.md#errors, docs/api.md#authentication)', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  const session = (token?: string, headers: Record<string, string> = {}) =>
    call(app.url, 'POST', '/v1/sessions', { token, body: { external_user_ref: 'user-1' }, headers });

  describe('API keys', () => {
    it('401 auth.unauthorized without an Authorization header', async () => {
      expectError(await session(), 401, 'auth.unauthorized');
    });

    it('401 for a malformed header or token', async () => {
      const { token } = await createKey(app.context, await createOrg(app.context));
      expectError(await session(undefined, { Authorization: token }), 401, 'auth.unauthorized');
      expectError(await session(undefined, { Authorization: `Basic ${token}` }), 401, 'auth.unauthorized');
      expectError(await session('not-a-token'), 401, 'auth.unauthorized');
    });

    it('401 for a token whose checksum does not match, without a database lookup', async () => {
      const { token } = await createKey(app.context, await createOrg(app.context));
      const mistyped = token.slice(0, 12) + (token[12] === 'x' ? 'y' : 'x') + token.slice(13);
      const queries: string[] = [];
      const listener = (q: { sql: string }) => queries.push(q.sql);
      app.context.db.on('query', listener);
      try {
        expectError(await session(mistyped), 401, 'auth.unauthorized');
      } finally {
        app.context.db.removeListener('query', listener);
      }
      expect(queries.filter((q) => q.includes('api_keys'))).to.deep.equal([]);
    });

    it('401 for a well-formed token that was never issued', async () => {
      expectError(await session(generateToken()), 401, 'auth.unauthorized');
    });

    it('401 for a revoked key, from the very next request', async () => {
      const org = await createOrg(app.context);
      const key = await createKey(app.context, org);
      expect((await session(key.token)).status).to.equal(201);
      const admin = await adminToken({ organizationId: org });
      expect((await call(app.url, 'DELETE', `/v1/organizations/${org}/api-keys/${key.id}`, { token: admin })).status).to.equal(204);
      expectError(await session(key.token), 401, 'auth.unauthorized');
    });

    it('403 organization.inactive for a suspended organization', async () => {
      const org = await createOrg(app.context);
      const key = await createKey(app.context, org);
      await suspendOrg(app.context, org);
      expectError(await session(key.token), 403, 'organization.inactive');
    });

    it('403 auth.insufficient_scope when the key lacks the route scope', async () => {
      const org = await createOrg(app.context);
      const registerOnly = await createKey(app.context, org, ['works:register']);
      const updater = await createKey(app.context, org, ['works:update']);
      const body = { network: 'testnet', creators: [{ full_name: 'A', roles: { author: true } }] };
      // version writes need works:update; past the scope check, an unknown work is 404
      expectError(
        await call(app.url, 'POST', '/v1/works/123456789/versions/init', { token: registerOnly.token, body }),
        403,
        'auth.insufficient_scope',
      );
      expectError(
        await call(app.url, 'POST', '/v1/works/123456789/versions/init', { token: updater.token, body }),
        404,
        'common.not_found',
      );
      expectError(await call(app.url, 'POST', '/v1/works/init', { token: updater.token, body }), 403, 'auth.insufficient_scope');
    });

    it('records last_used_at, at most once a minute per key', async () => {
      const org = await createOrg(app.context);
      const key = await createKey(app.context, org);
      const updates: string[] = [];
      const listener = (q: { sql: string }) => q.sql.startsWith('update "api_keys"') && updates.push(q.sql);
      app.context.db.on('query', listener);
      try {
        for (let i = 0; i < 5; i++) expect((await session(key.token)).status).to.equal(201);
        // the write is made off the request's path: wait for the row to show it (not a count of polls tuned to a machine)
        const written = await eventually(async () => {
          const row: { last_used_at: Date | null } | undefined = await app.context
            .db('api_keys')
            .where({ id: key.id })
            .first('last_used_at');
          return row?.last_used_at ?? undefined;
        }, 'last_used_at written');
        expect(written).to.be.instanceOf(Date);
        const first = written.getTime();
        for (let i = 0; i < 5; i++) expect((await session(key.token)).status).to.equal(201);
        const again = await app.context.db('api_keys').where({ id: key.id }).first('last_used_at');
        expect(again.last_used_at.getTime()).to.equal(first);
      } finally {
        app.context.db.removeListener('query', listener);
      }
      expect(updates.length).to.be.at.most(5).and.at.least(1);
    });
  });

  describe('a second web instance', () => {
    it('sees a revocation made through the first on its next request', async () => {
      const second = await startApp();
      try {
        const org = await createOrg(app.context);
        const key = await createKey(app.context, org);
        expect((await call(second.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'u' } })).status).to.equal(
          201,
        );
        const admin = await adminToken({ organizationId: org });
        expect((await call(app.url, 'DELETE', `/v1/organizations/${org}/api-keys/${key.id}`, { token: admin })).status).to.equal(204);
        expectError(
          await call(second.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'u' } }),
          401,
          'auth.unauthorized',
        );
      } finally {
        await second.close();
      }
    });
  });

  describe('administrator tokens', () => {
    const list = (org: string, token?: string) => call(app.url, 'GET', `/v1/organizations/${org}/api-keys`, { token });

    it('401 without a token, or with an API key instead', async () => {
      const org = await createOrg(app.context);
      expectError(await list(org), 401, 'auth.unauthorized');
      const key = await createKey(app.context, org);
      expectError(await list(org, key.token), 401, 'auth.unauthorized');
    });

    it('401 for another issuer, another audience, an expired token, a foreign key or alg none', async () => {
      const org = await createOrg(app.context);
      expectError(await list(org, await adminToken({ organizationId: org, issuer: 'https://evil.example/' })), 401, 'auth.unauthorized');
      expectError(await list(org, await adminToken({ organizationId: org, audience: 'other-api' })), 401, 'auth.unauthorized');
      expectError(await list(org, await adminToken({ organizationId: org, expiresInSeconds: -120 })), 401, 'auth.unauthorized');
      const { privateKey } = await generateKeyPair('RS256');
      expectError(await list(org, await adminToken({ organizationId: org, key: privateKey })), 401, 'auth.unauthorized');
      const header = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
      const claims = Buffer.from(
        JSON.stringify({
          iss: IDP.issuer,
          aud: IDP.audience,
          sub: 'x',
          org_id: org,
          roles: ['admin'],
          exp: Math.floor(Date.now() / 1000) + 600,
        }),
      ).toString('base64url');
      expectError(await list(org, `${header}.${claims}.`), 401, 'auth.unauthorized');
    });

    it("403 common.forbidden for another organization's administrator or a token without the admin role", async () => {
      const org = await createOrg(app.context);
      const other = await createOrg(app.context);
      expectError(await list(org, await adminToken({ organizationId: other })), 403, 'common.forbidden');
      expectError(await list(org, await adminToken({ organizationId: org, roles: ['viewer'] })), 403, 'common.forbidden');
      expect((await list(org, await adminToken({ organizationId: org }))).status).to.equal(200);
    });
  });
});
