import { expect } from 'chai';
import { startApp, call, expectError, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { authenticateSession } from '../../shared/sessions/service';

describe('POST /v1/sessions (docs/api.md#sessions)', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  it('issues a one-hour read-only token bound to the ref', async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org, ['works:read']);
    const reply = await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'user-ü-1' } });
    expect(reply.status).to.equal(201);
    expect(Object.keys(reply.body)).to.have.members(['session_token', 'external_user_ref', 'expires_at']);
    expect(reply.body.external_user_ref).to.equal('user-ü-1');
    const ttl = new Date(reply.body.expires_at).getTime() - Date.now();
    expect(ttl).to.be.within(3590_000, 3600_000);
    const principal = await authenticateSession(
      { db: app.context.db, secretsKey: app.context.config.secrets.key },
      reply.body.session_token,
    );
    expect(principal).to.deep.include({ kind: 'session', organizationId: org, externalUserRef: 'user-ü-1', apiKeyId: key.id });
    expect(principal.scopes).to.deep.equal(['works:read']);
  });

  it('422 session.invalid_external_user_ref for an empty, missing, non-string or over-255-byte ref', async () => {
    const key = await createKey(app.context, await createOrg(app.context));
    for (const body of [
      { external_user_ref: '' },
      {},
      { external_user_ref: 7 },
      { external_user_ref: 'é'.repeat(128) },
      { external_user_ref: 'a'.repeat(256) },
    ]) {
      expectError(await call(app.url, 'POST', '/v1/sessions', { token: key.token, body }), 422, 'session.invalid_external_user_ref');
    }
    expect(
      (await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'a'.repeat(255) } })).status,
    ).to.equal(201);
  });

  it('a session token cannot mint sessions, and dies with its key', async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    const { body } = await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'u' } });
    expectError(
      await call(app.url, 'POST', '/v1/sessions', { token: body.session_token, body: { external_user_ref: 'u' } }),
      403,
      'auth.insufficient_scope',
    );
    await app.context.db('api_keys').where({ id: key.id }).update({ revoked_at: app.context.db.fn.now() });
    let failure: unknown;
    await authenticateSession({ db: app.context.db, secretsKey: app.context.config.secrets.key }, body.session_token).catch(
      (e) => (failure = e),
    );
    expect((failure as { code?: string })?.code).to.equal('auth.unauthorized');
  });

  it('refuses a tampered session token', async () => {
    const key = await createKey(app.context, await createOrg(app.context));
    const { body } = await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'u' } });
    const [h, p, s] = (body.session_token as string).slice(4).split('.');
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const forged = `wrs_${h}.${Buffer.from(JSON.stringify({ ...claims, ref: 'someone-else' })).toString('base64url')}.${s}`;
    let failure: unknown;
    await authenticateSession({ db: app.context.db, secretsKey: app.context.config.secrets.key }, forged).catch((e) => (failure = e));
    expect((failure as { code?: string })?.code).to.equal('auth.unauthorized');
  });
});
