import { expect } from 'chai';
import { startApp, call, logsFromNow, type TestApp } from '../helpers/app';
import { createOrg, createKey, issuedSecrets } from '../helpers/factories';
import { adminToken } from '../helpers/identity';
import { knownSecrets, leaks } from '../helpers/suite-checks';

/**
 * Provokes the paths most likely to leak a credential into the logs and scans the lines this file's app
 * wrote. Every line of the whole run is scanned the same way by the root afterAll hook (suite-checks.ts).
 */
describe('logs never contain a credential', () => {
  let app: TestApp;
  let ours: () => string[];
  before(async () => {
    ours = logsFromNow();
    app = await startApp();
  });
  after(() => app.close());

  it('after successes and failures carrying credentials in headers, bodies and query strings', async () => {
    const org = await createOrg(app.context);
    const admin = await adminToken({ organizationId: org });
    issuedSecrets.add(admin);
    const created = await call(app.url, 'POST', `/v1/organizations/${org}/api-keys`, {
      token: admin,
      body: { name: 'scan', scopes: ['works:read'] },
    });
    issuedSecrets.add(created.body.token).add(created.body.webhook_secret);
    const session = await call(app.url, 'POST', '/v1/sessions', { token: created.body.token, body: { external_user_ref: 'scan' } });
    issuedSecrets.add(session.body.session_token);
    // failures: bad JSON with a token inside, a token in a query string, a revoked key, a bad admin token
    await call(app.url, 'POST', '/v1/sessions', {
      token: created.body.token,
      raw: `{"token":"${created.body.token}"`,
      headers: { 'Content-Type': 'application/json' },
    });
    await call(app.url, 'GET', `/v1/ws/transactions/x?access_token=${session.body.session_token}`);
    await call(app.url, 'GET', `/readyz?token=${created.body.token}`);
    const revoked = await createKey(app.context, org);
    await call(app.url, 'DELETE', `/v1/organizations/${org}/api-keys/${revoked.id}`, { token: admin });
    await call(app.url, 'POST', '/v1/sessions', { token: revoked.token, body: { external_user_ref: 'x' } });
    await call(app.url, 'GET', `/v1/organizations/${org}/api-keys`, { token: `${admin}x` });

    const provoked = [
      admin,
      created.body.token,
      created.body.webhook_secret,
      session.body.session_token,
      revoked.token,
      revoked.webhookSecret,
    ];
    expect(
      provoked.every((s) => typeof s === 'string' && s.length > 20),
      'every credential was handed out',
    ).to.equal(true);
    const secrets = await knownSecrets();
    for (const secret of provoked) expect(secrets.has(secret), 'scanned for').to.equal(true);

    expect(ours().length, 'this file wrote logs').to.be.greaterThan(5);
    expect(ours().some((l) => l.includes('"request_id"') && l.includes('"status":401'))).to.equal(true);
    expect(ours().some((l) => l.includes('access_token=[redacted]'))).to.equal(true);
    expect(leaks(ours(), secrets)).to.deep.equal([]);
  });
});
