import { expect } from 'chai';
import { startApp, call, expectError, type TestApp } from '../helpers/app';
import { createOrg } from '../helpers/factories';
import { adminToken } from '../helpers/identity';
import { hashToken, isWellFormedToken } from '../../shared/api-keys/token';
import { webhookSecretAad } from '../../shared/api-keys/service';

describe('API key management (docs/api.md#api-key-management)', () => {
  let app: TestApp;
  let org: string;
  let admin: string;
  before(async () => {
    app = await startApp();
    org = await createOrg(app.context);
    admin = await adminToken({ organizationId: org });
  });
  after(() => app.close());

  const create = (body: unknown) => call(app.url, 'POST', `/v1/organizations/${org}/api-keys`, { token: admin, body });

  it('creates a key and shows the token and webhook secret exactly once', async () => {
    const reply = await create({ name: 'backend', scopes: ['works:register', 'works:read'], webhook_url: 'https://partner.example/hooks' });
    expect(reply.status).to.equal(201);
    expect(Object.keys(reply.body)).to.have.members([
      'id',
      'name',
      'prefix',
      'scopes',
      'webhook_url',
      'created_at',
      'token',
      'webhook_secret',
    ]);
    expect(isWellFormedToken(reply.body.token)).to.equal(true);
    expect(reply.body.prefix).to.equal(reply.body.token.slice(0, 16));
    expect(Buffer.from(reply.body.webhook_secret, 'base64')).to.have.length(32);
    expect(reply.headers.get('cache-control')).to.equal('no-store');

    const listed = await call(app.url, 'GET', `/v1/organizations/${org}/api-keys`, { token: admin });
    expect(listed.status).to.equal(200);
    const entry = listed.body.api_keys.find((k: { id: string }) => k.id === reply.body.id);
    expect(Object.keys(entry)).to.have.members([
      'id',
      'name',
      'prefix',
      'scopes',
      'webhook_url',
      'created_at',
      'last_used_at',
      'revoked_at',
    ]);
    expect(listed.text).to.not.include(reply.body.token);
    expect(listed.text).to.not.include(reply.body.webhook_secret);
  });

  it('stores only the token hash and the secret encrypted', async () => {
    const reply = await create({ name: 'stored', scopes: ['works:update'] });
    const row = await app.context.db('api_keys').where({ id: reply.body.id }).first();
    expect(Buffer.compare(row.token_hash, hashToken(reply.body.token))).to.equal(0);
    const dump = JSON.stringify(await app.context.db.raw('select * from api_keys')) + JSON.stringify(row);
    expect(dump).to.not.include(reply.body.token);
    expect(dump).to.not.include(reply.body.webhook_secret);
    expect(dump).to.not.include(Buffer.from(reply.body.webhook_secret, 'base64').toString('hex'));
    const opened = app.context.box.open(row.webhook_secret_encrypted, webhookSecretAad(reply.body.id));
    expect(opened.toString('base64')).to.equal(reply.body.webhook_secret);
  });

  it('validates the body: 422 with details, nothing created', async () => {
    const before = await app.context.db('api_keys').where({ organization_id: org }).count<{ count: string }[]>('* as count');
    const cases = [
      {},
      { name: '', scopes: ['works:read'] },
      { name: 'x', scopes: [] },
      { name: 'x', scopes: ['works:admin'] },
      { name: 'x', scopes: ['works:read'], extra: 1 },
      { name: 'x', scopes: ['works:read'], webhook_url: 'not a url' },
      { name: 'x', scopes: ['works:read'], webhook_url: 'ftp://partner.example/' },
    ];
    for (const body of cases) {
      const error = expectError(await create(body), 422, 'common.validation_failed');
      expect(error.details, JSON.stringify(body)).to.be.an('array').that.is.not.empty;
    }
    const after = await app.context.db('api_keys').where({ organization_id: org }).count<{ count: string }[]>('* as count');
    expect(after[0]!.count).to.equal(before[0]!.count);
  });

  it('revokes idempotently: 204 twice, revoked_at kept from the first time', async () => {
    const reply = await create({ name: 'to revoke', scopes: ['works:read'] });
    const path = `/v1/organizations/${org}/api-keys/${reply.body.id}`;
    expect((await call(app.url, 'DELETE', path, { token: admin })).status).to.equal(204);
    const first = (await app.context.db('api_keys').where({ id: reply.body.id }).first()).revoked_at;
    expect((await call(app.url, 'DELETE', path, { token: admin })).status).to.equal(204);
    const second = (await app.context.db('api_keys').where({ id: reply.body.id }).first()).revoked_at;
    expect(second.getTime()).to.equal(first.getTime());
  });

  it("404 for an unknown key, another organization's key, or an unknown organization", async () => {
    expectError(
      await call(app.url, 'DELETE', `/v1/organizations/${org}/api-keys/00000000-0000-4000-8000-000000000000`, { token: admin }),
      404,
      'common.not_found',
    );
    const other = await createOrg(app.context);
    const otherAdmin = await adminToken({ organizationId: other });
    const foreign = await call(app.url, 'POST', `/v1/organizations/${other}/api-keys`, {
      token: otherAdmin,
      body: { name: 'o', scopes: ['works:read'] },
    });
    expectError(
      await call(app.url, 'DELETE', `/v1/organizations/${org}/api-keys/${foreign.body.id}`, { token: admin }),
      404,
      'common.not_found',
    );
    const ghost = '11111111-1111-4111-8111-111111111111';
    expectError(
      await call(app.url, 'GET', `/v1/organizations/${ghost}/api-keys`, { token: await adminToken({ organizationId: ghost }) }),
      404,
      'common.not_found',
    );
  });
});
