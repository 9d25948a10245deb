import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { startApp, call, expectError, type TestApp } from '../helpers/app';
import { createOrg, createKey, suspendOrg } from '../helpers/factories';
import { startTestWorkers, useStack } from '../helpers/workers';
import { initBody, creator, upload, register } from '../helpers/registration';
import { configWith } from '../helpers/services';
import { creditOrganization } from '../../shared/organizations/service';

describe('registration: every error row leaves nothing changed', function () {
  this.timeout(120_000);
  const stack = useStack();
  let app: TestApp;
  before(() => (app = stack.app));

  const snapshot = async (org: string) => ({
    balance: Number((await app.context.db('organizations').where({ id: org }).first()).credit_balance),
    works: Number((await app.context.db('works').where({ organization_id: org }).count<{ count: string }[]>('* as count'))[0]!.count),
    transactions: Number(
      (await app.context.db('transactions').where({ organization_id: org }).count<{ count: string }[]>('* as count'))[0]!.count,
    ),
    uploads: (await app.context.redis.keys(`${app.context.config.redis.prefix}:job:${org}:*`)).length,
  });

  it('init: 422 with details for each rule of docs/api.md#field-rules', async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    const before = await snapshot(org);
    const cases: [Record<string, unknown>, string][] = [
      [initBody({ title: '   ' }), '/title'],
      [initBody({ title: 'x'.repeat(301) }), '/title'],
      [initBody({ creators: [] }), '/creators'],
      [initBody({ creators: Array.from({ length: 33 }, () => creator()) }), '/creators'],
      [initBody({ filename: 'a/b.wav' }), '/filename'],
      [initBody({ filename: '..' }), '/filename'],
      [initBody({ filename: 'bad\u0001name.wav' }), '/filename'],
      // C1 controls are control characters too (Unicode Cc)
      [initBody({ filename: 'bad\u0085name.wav' }), '/filename'],
      [initBody({ filename: 'bad\u009fname.wav' }), '/filename'],
      [initBody({ filename: 'é'.repeat(128) }), '/filename'],
      [initBody({ network: 'devnet' }), '/network'],
      [initBody({ network: 'mainnet' }), '/network'],
      [initBody({ creators: [creator({ roles: { author: false } })] }), '/creators/0/roles'],
      [initBody({ creators: [creator({ ipi: '12345678' })] }), '/creators/0/ipi'],
      [initBody({ creators: [creator({ isni: '0000000121464381' })] }), '/creators/0/isni'],
      [initBody({ creators: [creator({ email: 'not-an-email' })] }), '/creators/0/email'],
      [initBody({ external_user_ref: '' }), '/external_user_ref'],
      [initBody({ external_user_ref: 'é'.repeat(128) }), '/external_user_ref'],
      [initBody({ surprise: true }), '/surprise'],
      [{ ...initBody(), title: undefined }, '/title'],
    ];
    for (const [body, path] of cases) {
      const error = expectError(await call(app.url, 'POST', '/v1/works/init', { token: key.token, body }), 422, 'common.validation_failed');
      expect(
        (error.details as { path: string }[]).map((d) => d.path),
        JSON.stringify(body).slice(0, 120),
      ).to.include(path);
    }
    expect(await snapshot(org)).to.deep.equal(before);
  });

  it('init: 401 without a key, 403 without the scope or for a suspended organization', async () => {
    const org = await createOrg(app.context);
    expectError(await call(app.url, 'POST', '/v1/works/init', { body: initBody() }), 401, 'auth.unauthorized');
    const reader = await createKey(app.context, org, ['works:read', 'works:update']);
    expectError(await call(app.url, 'POST', '/v1/works/init', { token: reader.token, body: initBody() }), 403, 'auth.insufficient_scope');
    const writer = await createKey(app.context, org, ['works:register']);
    await suspendOrg(app.context, org);
    expectError(await call(app.url, 'POST', '/v1/works/init', { token: writer.token, body: initBody() }), 403, 'organization.inactive');
    expectError(
      await call(app.url, 'POST', '/v1/works/confirm', { token: writer.token, body: { job_id: 'x' } }),
      403,
      'organization.inactive',
    );
  });

  it('prepare: 404 for an unknown job or another organization’s job, 422 before any upload and for empty audio', async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    expectError(
      await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: 'f1e2d3c4-0000-4000-8000-000000000000' } }),
      404,
      'registration.upload_session_not_found',
    );
    const init = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
    const other = await createKey(app.context, await createOrg(app.context));
    expectError(
      await call(app.url, 'POST', '/v1/works/prepare', { token: other.token, body: { job_id: init.body.job_id } }),
      404,
      'registration.upload_session_not_found',
    );
    expectError(
      await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: init.body.job_id } }),
      422,
      'registration.audio_missing',
    );
    const empty = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
    expect((await upload(empty.body.upload_url, Buffer.alloc(0))).status).to.equal(200);
    const before = await snapshot(org);
    expectError(
      await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: empty.body.job_id } }),
      422,
      'registration.audio_empty',
    );
    expect(await snapshot(org)).to.deep.equal(before);
  });

  it('confirm: 404 for an unknown job, a job never prepared, and a second confirm', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    expectError(
      await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: 'nope' } }),
      404,
      'registration.prepared_not_found',
    );
    const init = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
    expectError(
      await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: init.body.job_id } }),
      404,
      'registration.prepared_not_found',
    );
    const r = await register(app.url, key.token);
    expect(r.confirm.status).to.equal(202);
    const after = await snapshot(org);
    expectError(
      await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: r.jobId } }),
      404,
      'registration.prepared_not_found',
    );
    expect((await snapshot(org)).balance).to.equal(after.balance);
  });

  it('prepare with too few credits: 200, is_valid false with credits.insufficient; confirm 422 quote_invalid, no debit', async () => {
    const org = await createOrg(app.context, 3);
    const key = await createKey(app.context, org);
    const init = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
    await upload(init.body.upload_url, randomBytes(1024));
    const prepared = await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: init.body.job_id } });
    expect(prepared.status).to.equal(200);
    expect(prepared.body.is_valid).to.equal(false);
    expect(prepared.body.error.code).to.equal('credits.insufficient');
    const before = await snapshot(org);
    expectError(
      await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: init.body.job_id } }),
      422,
      'registration.quote_invalid',
    );
    expectError(
      await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: init.body.job_id } }),
      422,
      'registration.quote_invalid',
    );
    expect(await snapshot(org)).to.deep.equal(before);
    expect(before.balance).to.equal(3);
  });

  it('confirm of a valid quote the balance no longer covers: 422 credits.insufficient, no debit, the quote kept', async () => {
    const prepareOne = async (token: string) => {
      const init = await call(app.url, 'POST', '/v1/works/init', { token, body: initBody() });
      await upload(init.body.upload_url, randomBytes(1024));
      const prepared = await call(app.url, 'POST', '/v1/works/prepare', { token, body: { job_id: init.body.job_id } });
      expect(prepared.status).to.equal(200);
      return { jobId: init.body.job_id as string, quote: prepared.body };
    };
    // the price of this call, learnt in another organization; credits for one and a half of it
    const probe = await prepareOne((await createKey(app.context, await createOrg(app.context))).token);
    const price = probe.quote.total_price_credits as number;
    const org = await createOrg(app.context, Math.floor(price * 1.5));
    const key = await createKey(app.context, org);
    const [first, second] = [await prepareOne(key.token), await prepareOne(key.token)];
    expect([first.quote.is_valid, second.quote.is_valid, second.quote.total_price_credits]).to.deep.equal([true, true, price]);
    const confirmed = await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: first.jobId } });
    expect(confirmed.status).to.equal(202);
    const before = await snapshot(org);
    expect(before.balance).to.equal(Math.floor(price * 1.5) - price);
    expectError(
      await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: second.jobId } }),
      422,
      'credits.insufficient',
    );
    expect(await snapshot(org)).to.deep.equal(before);
    // credits added later: the same quote confirms, charged once
    await creditOrganization(app.context.db, org, price);
    const later = await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: second.jobId } });
    expect(later.status).to.equal(202);
    expect((await snapshot(org)).balance).to.equal(before.balance);
  });

  it('prepare: 413 registration.audio_too_large over the size limit', async () => {
    const small = configWith({ UPLOAD_MAX_BYTES: '1000', REDIS_PREFIX: `${app.context.config.redis.prefix}_limit` });
    const limitedApp = await startApp(small);
    const limitedWorkers = await startTestWorkers(small, ['prepare']);
    try {
      const key = await createKey(app.context, await createOrg(app.context));
      const init = await call(limitedApp.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
      await upload(init.body.upload_url, randomBytes(1001));
      expectError(
        await call(limitedApp.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: init.body.job_id } }),
        413,
        'registration.audio_too_large',
      );
    } finally {
      await limitedWorkers.stop();
      await limitedApp.close();
    }
  });

  it('prepare: 422 registration.dry_run_failed when the chain would refuse the call (relayer cannot pay)', async () => {
    const broke = configWith({ RELAYER_SEED_TESTNET: '//NobodyFundedThis', REDIS_PREFIX: `${app.context.config.redis.prefix}_broke` });
    const brokeApp = await startApp(broke);
    const brokeWorkers = await startTestWorkers(broke, ['prepare']);
    try {
      const org = await createOrg(app.context, 1000);
      const key = await createKey(app.context, org);
      const init = await call(brokeApp.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
      const prepare = () => call(brokeApp.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: init.body.job_id } });
      // the dry run is asked while the upload is read, but an upload's own refusal still answers first
      expectError(await prepare(), 422, 'registration.audio_missing');
      await upload(init.body.upload_url, randomBytes(2048));
      const error = expectError(await prepare(), 422, 'registration.dry_run_failed');
      expect(error.message).to.match(/Payment/);
      // and an upload that takes longer to read than the dry run to fail is refused the same way
      const large = await call(brokeApp.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
      await upload(large.body.upload_url, randomBytes(32 * 1024 * 1024));
      const largeError = expectError(
        await call(brokeApp.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: large.body.job_id } }),
        422,
        'registration.dry_run_failed',
      );
      expect(largeError.message).to.match(/Payment/);
      expect((await snapshot(org)).balance).to.equal(1000);
    } finally {
      await brokeWorkers.stop();
      await brokeApp.close();
    }
  });

  it('transactions: 404 for another organization and for a session of another ref', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const r = await register(app.url, key.token, initBody({ external_user_ref: 'alice' }));
    const txId = r.confirm.body.transaction_id;
    const stranger = await createKey(app.context, await createOrg(app.context));
    expectError(await call(app.url, 'GET', `/v1/transactions/${txId}`, { token: stranger.token }), 404, 'common.not_found');
    const alice = await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'alice' } });
    const bob = await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'bob' } });
    expect((await call(app.url, 'GET', `/v1/transactions/${txId}`, { token: alice.body.session_token })).status).to.equal(200);
    expectError(await call(app.url, 'GET', `/v1/transactions/${txId}`, { token: bob.body.session_token }), 404, 'common.not_found');
    expectError(await call(app.url, 'GET', '/v1/transactions/not-a-uuid', { token: key.token }), 404, 'common.not_found');
  });
});
