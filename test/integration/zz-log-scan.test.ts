import { expect } from 'chai';
import { startApp, call, logLines, type TestApp } from '../helpers/app';
import { createOrg, createKey, issuedSecrets } from '../helpers/factories';
import { adminToken } from '../helpers/identity';
import { walletSeedAad } from '../../shared/organizations/service';

/**
 * Runs last (file order): scans every log line the suite's apps and workers wrote for any token, secret,
 * session token, admin token or wallet seed, after provoking the paths most likely to leak them.
 */
describe('logs never contain a credential', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  it('after successes and failures carrying credentials in headers, bodies and query strings', async () => {
    const org = await createOrg(app.context);
    const admin = await adminToken({ organizationId: org });
    issuedSecrets.add(admin);
    const created = await call(app.url, 'POST', `/v1/organizations/${org}/api-keys`, { token: admin, body: { name: 'scan', scopes: ['works:read'] } });
    issuedSecrets.add(created.body.token).add(created.body.webhook_secret);
    const session = await call(app.url, 'POST', '/v1/sessions', { token: created.body.token, body: { external_user_ref: 'scan' } });
    issuedSecrets.add(session.body.session_token);
    // failures: bad JSON with a token inside, a token in a query string, a revoked key, a bad admin token
    await call(app.url, 'POST', '/v1/sessions', { token: created.body.token, raw: `{"token":"${created.body.token}"`, headers: { 'Content-Type': 'application/json' } });
    await call(app.url, 'GET', `/v1/ws/transactions/x?access_token=${session.body.session_token}`);
    await call(app.url, 'GET', `/readyz?token=${created.body.token}`);
    const revoked = await createKey(app.context, org);
    await call(app.url, 'DELETE', `/v1/organizations/${org}/api-keys/${revoked.id}`, { token: admin });
    await call(app.url, 'POST', '/v1/sessions', { token: revoked.token, body: { external_user_ref: 'x' } });
    await call(app.url, 'GET', `/v1/organizations/${org}/api-keys`, { token: `${admin}x` });
    for (const wallet of await app.context.db('wallets').select('organization_id', 'network', 'seed_encrypted')) {
      const seed = app.context.box.open(wallet.seed_encrypted, walletSeedAad(wallet.organization_id, wallet.network));
      issuedSecrets.add(seed.toString('hex')).add(seed.toString('base64'));
    }
    issuedSecrets.add(app.context.config.secrets.key.toString('base64'));

    expect(logLines.length, 'the suite wrote logs').to.be.greaterThan(50);
    expect(logLines.some((l) => l.includes('"request_id"') && l.includes('"status":401'))).to.equal(true);
    expect(logLines.some((l) => l.includes('access_token=[redacted]'))).to.equal(true);
    expect(issuedSecrets.size).to.be.greaterThan(10);
    const leaks: string[] = [];
    for (const line of logLines) for (const secret of issuedSecrets) if (line.includes(secret)) leaks.push(`${secret.slice(0, 12)}… in ${line.slice(0, 160)}`);
    expect(leaks).to.deep.equal([]);
    expect(logLines.filter((l) => /authorization/i.test(l) && !l.includes('[redacted]'))).to.deep.equal([]);
  });
});
