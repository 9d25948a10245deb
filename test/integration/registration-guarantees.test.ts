import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { startApp, call, eventually, expectError, untilPast, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers, useStack } from '../helpers/workers';
import { WebhookReceiver, verifySignature } from '../helpers/receiver';
import { initBody, upload, register, quote, urlLapse } from '../helpers/registration';
import { configWith } from '../helpers/services';

describe('registration guarantees', function () {
  this.timeout(180_000);
  const stack = useStack();
  let app: TestApp;
  before(() => (app = stack.app));

  const balance = async (org: string) => Number((await app.context.db('organizations').where({ id: org }).first()).credit_balance);

  describe('Idempotency-Key', () => {
    it('replays the first response byte for byte, refuses another body (422) and a concurrent twin (409)', async () => {
      const key = await createKey(app.context, await createOrg(app.context));
      const idem = { 'Idempotency-Key': '3f0e8c56-2b55-4c1e-9a0f-7d8a1b2c3d4e' };
      const first = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody(), headers: idem });
      const again = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody(), headers: idem });
      expect(first.status).to.equal(200);
      expect(again.status).to.equal(200);
      expect(again.text).to.equal(first.text);
      expectError(
        await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody({ title: 'Other' }), headers: idem }),
        422,
        'idempotency.key_reused',
      );
      // another API key may use the same Idempotency-Key for its own request
      const otherKey = await createKey(app.context, await createOrg(app.context));
      const other = await call(app.url, 'POST', '/v1/works/init', { token: otherKey.token, body: initBody(), headers: idem });
      expect(other.body.job_id).to.not.equal(first.body.job_id);

      const racing = { 'Idempotency-Key': 'race-1' };
      const replies = await Promise.all(
        Array.from({ length: 10 }, () => call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody(), headers: racing })),
      );
      const statuses = replies.map((r) => r.status);
      expect(statuses.filter((s) => s === 200).length).to.be.at.least(1);
      for (const r of replies.filter((x) => x.status !== 200)) expectError(r, 409, 'idempotency.key_in_use');
      const ok = replies.filter((r) => r.status === 200);
      expect(new Set(ok.map((r) => r.body.job_id)).size).to.equal(1);
    });
  });

  describe('the organization rate limit (docs/api.md#rate-limits)', () => {
    it('is shared by every key of the organization: 429 organization.rate_limited with Retry-After past the burst', async () => {
      const limited = await startApp(configWith({ RATE_LIMIT_BURST: '3', RATE_LIMIT_PER_SECOND: '1' }));
      try {
        const org = await createOrg(app.context);
        const [a, b] = [await createKey(app.context, org), await createKey(app.context, org)];
        const other = await createKey(app.context, await createOrg(app.context));
        const statuses = [];
        for (const token of [a.token, b.token, a.token])
          statuses.push((await call(limited.url, 'POST', '/v1/works/init', { token, body: initBody() })).status);
        expect(statuses).to.deep.equal([200, 200, 200]);
        const refused = await call(limited.url, 'POST', '/v1/works/init', { token: b.token, body: initBody() });
        expectError(refused, 429, 'organization.rate_limited');
        expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 2);
        // another organization has its own bucket
        expect((await call(limited.url, 'POST', '/v1/works/init', { token: other.token, body: initBody() })).status).to.equal(200);
        // a refused request reserves nothing
        expect((await limited.context.redis.keys(`${limited.context.config.redis.prefix}:job:${org}:*`)).length).to.equal(3);
      } finally {
        await limited.close();
      }
    });
  });

  describe('the upload URL', () => {
    it('is single use: a second PUT is refused and prepare hashes the first bytes', async () => {
      const key = await createKey(app.context, await createOrg(app.context));
      const init = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
      const firstBytes = randomBytes(4096);
      expect((await upload(init.body.upload_url, firstBytes)).status).to.equal(200);
      const second = await upload(init.body.upload_url, randomBytes(4096));
      expect(second.status).to.equal(412);
      const prepared = await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: init.body.job_id } });
      expect(prepared.status).to.equal(200);
      const quote = await app.context.redis.hget(
        `${app.context.config.redis.prefix}:job:${(await app.context.db('api_keys').where({ id: key.id }).first()).organization_id}:${init.body.job_id}`,
        'quote',
      );
      expect(JSON.parse(quote!).mediaHash).to.equal('0x' + createHash('sha256').update(firstBytes).digest('hex'));
    });

    it('cannot be pointed at another key: its signature covers the one object key', async () => {
      const key = await createKey(app.context, await createOrg(app.context));
      const init = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
      const url = new URL(init.body.upload_url);
      const elsewhere = new URL(url);
      elsewhere.pathname = url.pathname.replace(/[^/]+$/, '00000000-0000-4000-8000-000000000000');
      const redirected = await upload(elsewhere.toString(), randomBytes(128));
      expect(redirected.status).to.equal(403);
      expect(await redirected.text()).to.include('SignatureDoesNotMatch');
      expect((await upload(init.body.upload_url, randomBytes(128))).status).to.equal(200); // the real one still works
    });

    it('is refused after it expires', async () => {
      const shortLived = configWith({ UPLOAD_TTL_SECONDS: '1' });
      const shortApp = await startApp(shortLived);
      try {
        const key = await createKey(app.context, await createOrg(app.context));
        const init = await call(shortApp.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
        const expiresAt = new Date(init.body.upload_expires_at).getTime();
        // upload_expires_at is the moment S3 stops taking the URL (its signing second plus its life), to the millisecond
        expect(expiresAt).to.equal(urlLapse(init.body.upload_url));
        await untilPast(expiresAt);
        const late = await upload(init.body.upload_url, randomBytes(128));
        expect(late.status).to.equal(403);
        expect(await late.text()).to.include('expired');
      } finally {
        await shortApp.close();
      }
    });
  });

  describe('confirm', () => {
    for (const n of [2, 20]) {
      it(`of one quote by ${n} concurrent callers: exactly one 202, the rest 404, charged once`, async () => {
        const org = await createOrg(app.context, 1000);
        const key = await createKey(app.context, org);
        const init = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
        await upload(init.body.upload_url, randomBytes(1024));
        const prepared = await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: init.body.job_id } });
        const replies = await Promise.all(
          Array.from({ length: n }, () =>
            call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: init.body.job_id } }),
          ),
        );
        expect(replies.filter((r) => r.status === 202)).to.have.length(1);
        for (const r of replies.filter((x) => x.status !== 202)) expectError(r, 404, 'registration.prepared_not_found');
        expect(await balance(org)).to.equal(1000 - prepared.body.total_price_credits);
        expect(await app.context.db('transactions').where({ organization_id: org }).count<{ count: string }[]>('* as count')).to.deep.equal(
          [{ count: '1' }],
        );
      });
    }

    it("of one organization, stalled on its debit, holds up no other organization's confirm", async () => {
      const [slowOrg, otherOrg] = [await createOrg(app.context, 1000), await createOrg(app.context, 1000)];
      const [slowKey, otherKey] = [await createKey(app.context, slowOrg), await createKey(app.context, otherOrg)];
      const [slowJob, otherJob] = [await quote(app.url, slowKey.token), await quote(app.url, otherKey.token)];
      // the slow confirm waits on a lock this test holds until the other confirm is done: through a web whose statements
      // may wait the longest it allows (web-statement-timeout.test.ts tests the bound itself)
      const patient = await startApp(configWith({ WEB_STATEMENT_TIMEOUT_MS: '20000' }));
      const confirm = (token: string, jobId: string) => call(patient.url, 'POST', '/v1/works/confirm', { token, body: { job_id: jobId } });
      // another session holds the slow organization's balance, as a credit does until it commits: its debit waits for it
      const holder = await app.context.db.transaction();
      try {
        await holder('organizations').where({ id: slowOrg }).forNoKeyUpdate().first();
        const slow = confirm(slowKey.token, slowJob.jobId);
        await eventually(async () => {
          const waiting = await app.context
            .db('pg_stat_activity')
            .where({ datname: app.context.db.raw('current_database()'), wait_event_type: 'Lock' })
            .whereLike('query', '%credit_ledger%');
          return waiting.length ? true : undefined;
        }, 'the slow confirm waiting on its organization');
        // bounded only so that a failure shows as one, not as a hang: the other confirm needs no lock the slow one holds
        const bound = new Promise<'neither'>((resolve) => setTimeout(() => resolve('neither'), 20_000).unref());
        const first = await Promise.race([confirm(otherKey.token, otherJob.jobId).then(() => 'other'), slow.then(() => 'slow'), bound]);
        expect(first).to.equal('other');
        await holder.rollback();
        expect((await slow).status).to.equal(202);
      } finally {
        if (!holder.isCompleted()) await holder.rollback();
        await patient.close();
      }
      const transactions = await app.context.db('transactions').whereIn('organization_id', [slowOrg, otherOrg]).select('ats_id');
      expect(new Set(transactions.map((t) => t.ats_id)).size).to.equal(2);
      expect(await balance(slowOrg)).to.equal(1000 - slowJob.prepare.body.total_price_credits);
      expect(await balance(otherOrg)).to.equal(1000 - otherJob.prepare.body.total_price_credits);
    });
  });

  describe('prepare of a large upload', () => {
    it('hashes 200 MB with flat memory (measured and printed)', async () => {
      const key = await createKey(app.context, await createOrg(app.context, 10_000));
      const init = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
      const size = 200 * 1024 * 1024;
      const chunk = randomBytes(1024 * 1024);
      const expected = createHash('sha256');
      let sent = 0;
      const body = new Readable({
        read() {
          if (sent >= size) return this.push(null);
          expected.update(chunk);
          sent += chunk.length;
          this.push(chunk);
        },
      });
      const put = await fetch(init.body.upload_url, {
        method: 'PUT',
        body: body as unknown as BodyInit,
        duplex: 'half',
        headers: { 'Content-Length': String(size) },
      } as RequestInit);
      expect(put.status).to.equal(200);
      global.gc?.();
      const baseline = process.memoryUsage().rss;
      let peak = baseline;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
      const started = Date.now();
      const prepared = await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: init.body.job_id } });
      clearInterval(sampler);
      expect(prepared.status, prepared.text).to.equal(200);
      const increaseMb = (peak - baseline) / 1024 / 1024;
      process.stdout.write(
        `      200 MB prepare: ${Date.now() - started} ms, peak RSS increase ${increaseMb.toFixed(1)} MB (web, worker and s3rver in this process)\n`,
      );
      // a buffered read would add at least 200 MB
      expect(increaseMb).to.be.below(100);
      const orgId = (await app.context.db('api_keys').where({ id: key.id }).first()).organization_id;
      const quote = JSON.parse(
        (await app.context.redis.hget(`${app.context.config.redis.prefix}:job:${orgId}:${init.body.job_id}`, 'quote'))!,
      );
      expect(quote.mediaHash).to.equal('0x' + expected.digest('hex'));
      expect(quote.audioSize).to.equal(size);
      expect(prepared.body.storage_fee_credits).to.equal(Math.ceil((size - 10 * 1024 * 1024) / (1024 * 1024)));
    });
  });

  describe('a submission the chain refuses', () => {
    it('ends in work_failed with the whole debit refunded', async () => {
      // prepare and confirm as usual; the chain worker's relayer has no funds, so the pool refuses the extrinsic
      const prefix = `${app.context.config.redis.prefix}_refused`;
      const funded = configWith({ REDIS_PREFIX: prefix });
      // a relayer that cannot pay is in the way, not the call: sent again until CHAIN_GIVE_UP_AFTER, then refunded
      const broke = configWith({ REDIS_PREFIX: prefix, RELAYER_SEED_TESTNET: '//NobodyFundedThis', CHAIN_GIVE_UP_AFTER: '4' });
      const webApp = await startApp(funded);
      const preparer = await startTestWorkers(funded, ['prepare']);
      const chainWorkers = await startTestWorkers(broke, ['chain', 'webhooks']);
      const receiver = await new WebhookReceiver().start();
      try {
        const org = await createOrg(app.context, 1000);
        const key = await createKey(app.context, org, ['works:register'], receiver.url);
        const r = await register(webApp.url, key.token, initBody({ external_user_ref: 'u-9' }));
        expect(r.confirm.status).to.equal(202);
        expect(await balance(org)).to.equal(1000 - r.prepare.body.total_price_credits);
        const [hook] = await receiver.waitFor(1);
        expect(verifySignature(key.webhookSecret, hook!)).to.equal(true);
        expect(hook!.headers['x-service-event']).to.equal('work_failed');
        const txId = r.confirm.body.transaction_id;
        expect(Object.keys(hook!.body)).to.have.members([
          'event',
          'transaction_id',
          'organization_id',
          'api_key_id',
          'external_user_ref',
          'network',
          'ats_id',
          'reason',
          'message',
          'failed_at',
        ]);
        expect(hook!.body).to.deep.include({
          event: 'work_failed',
          transaction_id: txId,
          organization_id: org,
          api_key_id: key.id,
          external_user_ref: 'u-9',
          network: 'testnet',
          ats_id: null,
          reason: 'chain.submission_rejected',
        });
        expect(await balance(org)).to.equal(1000);
        const ledger = await app.context.db('credit_ledger').where({ organization_id: org, reference: txId }).orderBy('id');
        expect(ledger.map((e) => [e.kind, Number(e.amount)])).to.deep.equal([
          ['debit', -r.prepare.body.total_price_credits],
          ['refund', r.prepare.body.total_price_credits],
        ]);
        const status = await call(webApp.url, 'GET', `/v1/transactions/${txId}`, { token: key.token });
        expect(status.body).to.deep.include({ status: 'failed', current_step: 'failed', progress: 100, is_complete: true });
        expect(status.body.result.error.code).to.equal('chain.submission_rejected');
        expect(await app.context.db('works').where({ organization_id: org }).first()).to.equal(undefined);
      } finally {
        await receiver.stop();
        await chainWorkers.stop();
        await preparer.stop();
        await webApp.close();
      }
    });
  });
});
