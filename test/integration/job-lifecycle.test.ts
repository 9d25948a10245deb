import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { QueueEvents } from 'bullmq';
import { objectExists, putObject } from '../../shared/storage/objects';
import { call, eventually, expectError, startApp, untilPast, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers, useStack } from '../helpers/workers';
import { addVersion, creator, initBody, quote, settled, upload } from '../helpers/registration';
import { configWith } from '../helpers/services';
import { adminToken } from '../helpers/identity';
import { audioKey } from '../../shared/registration/service';
import type { Resources } from '../../shared/resources';
import { createRedis } from '../../shared/redis/client';
import { bullPrefix } from '../../shared/redis/settings';

/** Whether the bucket still holds an object. */
const stored = (ctx: Resources, key: string) => objectExists(ctx.storage, key);

describe('a job moves one way: reserved → uploaded → prepared → confirmed (docs/api.md#job-states)', function () {
  this.timeout(240_000);
  const stack = useStack({ env: { REDIS_PREFIX: `jobs_${Date.now()}` }, queues: ['prepare', 'chain', 'maintenance'] });
  let app: TestApp;
  before(() => (app = stack.app));

  const ledger = async (org: string) => app.context.db('credit_ledger').where({ organization_id: org }).orderBy('id');
  const balance = async (org: string) => Number((await app.context.db('organizations').where({ id: org }).first()).credit_balance);

  it('a registration: prepare and confirm after confirm answer 404; one debit, one transaction, one anchor', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const q = await quote(app.url, key.token);
    const confirm = await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: q.jobId } });
    expect(confirm.status).to.equal(202);
    expectError(
      await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: q.jobId } }),
      404,
      'registration.upload_session_not_found',
    );
    expectError(
      await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: q.jobId } }),
      404,
      'registration.prepared_not_found',
    );

    const tx = await settled(app.context, confirm.body.transaction_id);
    expect(tx.status).to.equal('finalized');
    expect((await ledger(org)).map((e) => [e.kind, Number(e.amount)])).to.deep.equal([
      ['grant', 1000],
      ['debit', -q.prepare.body.total_price_credits],
    ]);
    expect(await app.context.db('transactions').where({ organization_id: org }).pluck('id')).to.deep.equal([tx.id]);
    expect(await app.context.db('works').where({ organization_id: org }).pluck('id')).to.deep.equal([q.jobId]);
    // and still 404 once the work is on chain
    expectError(
      await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: q.jobId } }),
      404,
      'registration.upload_session_not_found',
    );
  });

  it('a version: the same sequence ends with one debit and one anchored version', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const q = await quote(app.url, key.token);
    const first = await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: q.jobId } });
    const work = await settled(app.context, first.body.transaction_id);
    const atsId = Number(work.ats_id);
    const v = await addVersion(app.url, key.token, atsId, { network: 'testnet', creators: [creator({ full_name: 'Second Hand' })] });
    expect(v.confirm.status).to.equal(202);
    const path = `/v1/works/${atsId}/versions`;
    expectError(
      await call(app.url, 'POST', `${path}/prepare`, { token: key.token, body: { job_id: v.jobId } }),
      404,
      'registration.upload_session_not_found',
    );
    expectError(
      await call(app.url, 'POST', `${path}/confirm`, { token: key.token, body: { job_id: v.jobId } }),
      404,
      'registration.prepared_not_found',
    );
    expect((await settled(app.context, v.confirm.body.transaction_id)).status).to.equal('finalized');
    const debits = (await ledger(org)).filter((e) => e.kind === 'debit');
    expect(debits.map((e) => Number(e.amount))).to.deep.equal([-q.prepare.body.total_price_credits, -v.prepare.body.total_price_credits]);
    expect(await app.context.db('work_versions').where({ work_id: q.jobId }).orderBy('version').pluck('version')).to.deep.equal([1, 2]);
  });

  it('concurrent prepares of one job share one run: one hash, one quote', async () => {
    const key = await createKey(app.context, await createOrg(app.context, 1000));
    const init = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
    await upload(init.body.upload_url, randomBytes(256 * 1024));
    const replies = await Promise.all(
      Array.from({ length: 4 }, () => call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: init.body.job_id } })),
    );
    expect(replies.map((r) => r.status)).to.deep.equal([200, 200, 200, 200]);
    // a quote's expiry is taken from the clock of the run that priced it: one value, one run
    expect(new Set(replies.map((r) => r.text)).size).to.equal(1);
    const runs = (await app.context.queues.prepare.getJobs(['completed', 'active', 'waiting'])).filter((j) =>
      String(j.id).includes(init.body.job_id),
    );
    expect(runs).to.have.length(1);
  });

  it('prepare again before confirm replaces the quote without hashing again; confirm charges the latest once', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const q = await quote(app.url, key.token);
    const again = await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: q.jobId } });
    expect(again.status).to.equal(200);
    expect(again.body.commitment).to.equal(q.prepare.body.commitment);
    expect(Date.parse(again.body.expires_at)).to.be.at.least(Date.parse(q.prepare.body.expires_at));
    const record = await app.context.redis.hgetall(`${app.context.config.redis.prefix}:job:${org}:${q.jobId}`);
    expect(record).to.include({ state: 'prepared', run: '2' });
    expect(JSON.parse(record.audio!).size).to.equal(q.audio.length);
    const confirms = await Promise.all(
      [1, 2].map(() => call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: q.jobId } })),
    );
    expect(confirms.map((r) => r.status).sort()).to.deep.equal([202, 404]);
    expect(await balance(org)).to.equal(1000 - again.body.total_price_credits);
  });

  it('prepare runs until upload_expires_at, then 404; a quote taken before it is still confirmed, and charged, after it', async () => {
    // a session of 10 s: room for init, the PUT and the first prepare on a loaded machine; the quote lives 300 s
    const shortLived = await startApp(configWith({ REDIS_PREFIX: app.context.config.redis.prefix, UPLOAD_TTL_SECONDS: '10' }));
    try {
      const org = await createOrg(app.context, 1000);
      const key = await createKey(app.context, org);
      const q = await quote(shortLived.url, key.token);
      const uploadExpiresAt = Date.parse(q.init.body.upload_expires_at);
      expect(Date.parse(q.prepare.body.expires_at)).to.be.greaterThan(uploadExpiresAt);
      await untilPast(uploadExpiresAt);
      expectError(
        await call(app.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: q.jobId } }),
        404,
        'registration.upload_session_not_found',
      );
      // the refused prepare changed nothing: the job is still prepared, by its one run (the charge below is that run's quote)
      const record = await app.context.redis.hgetall(`${app.context.config.redis.prefix}:job:${org}:${q.jobId}`);
      expect(record).to.include({ state: 'prepared', run: '1' });
      const confirm = await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: q.jobId } });
      expect(confirm.status).to.equal(202);
      expect((await settled(app.context, confirm.body.transaction_id)).status).to.equal('finalized');
      expect(await balance(org)).to.equal(1000 - q.prepare.body.total_price_credits);
    } finally {
      await shortLived.close();
    }
  });

  it('a confirm whose process died mid-debit is settled from PostgreSQL: the job is confirmed, never charged twice', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const q = await quote(app.url, key.token);
    const confirm = await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: q.jobId } });
    expect(confirm.status).to.equal(202);
    // as if the confirming process died after its commit and before it moved the job on: a lapsed hold
    const jobKey = `${app.context.config.redis.prefix}:job:${org}:${q.jobId}`;
    await app.context.redis.hset(jobKey, { state: 'confirming', confirm_until: Date.now() - 1 });
    expectError(
      await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: q.jobId } }),
      404,
      'registration.prepared_not_found',
    );
    expect(await app.context.redis.hget(jobKey, 'state')).to.equal('confirmed');
    // and one that died before its commit goes back to prepared, its quote confirmable
    const q2 = await quote(app.url, key.token);
    const jobKey2 = `${app.context.config.redis.prefix}:job:${org}:${q2.jobId}`;
    await app.context.redis.hset(jobKey2, { state: 'confirming', confirm_until: Date.now() - 1 });
    expect((await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: q2.jobId } })).status).to.equal(202);
    expect((await ledger(org)).filter((e) => e.kind === 'debit')).to.have.length(2);
  });

  describe('strings PostgreSQL cannot store are refused at the edge', () => {
    const bad = { nul: 'a\u0000b', lone: 'a\ud800b', trailing: '\udfff' };

    it('in every text field of init, version init, sessions and API keys: 4xx, nothing reserved or dry-run', async () => {
      const org = await createOrg(app.context, 1000);
      const key = await createKey(app.context, org);
      const admin = await adminToken({ organizationId: org });
      const prepareRunsBefore = await app.context.queues.prepare.getJobCounts('completed', 'failed', 'active', 'waiting');
      for (const value of Object.values(bad)) {
        for (const body of [
          initBody({ title: value }),
          initBody({ external_user_ref: value }),
          initBody({ creators: [creator({ full_name: value })] }),
          initBody({ creators: [creator({ email: value })] }),
          initBody({ filename: `${value}.wav` }),
        ]) {
          const reply = await call(app.url, 'POST', '/v1/works/init', { token: key.token, body });
          const error = expectError(reply, 422, 'common.validation_failed');
          expect(JSON.stringify(error.details)).to.match(/NUL or an unpaired UTF-16 surrogate/);
        }
        expectError(
          await call(app.url, 'POST', '/v1/works/1/versions/init', {
            token: key.token,
            body: { network: 'testnet', creators: [creator({ full_name: value })] },
          }),
          422,
          'common.validation_failed',
        );
        expectError(
          await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: value } }),
          422,
          'common.validation_failed',
        );
        expectError(
          await call(app.url, 'POST', `/v1/organizations/${org}/api-keys`, { token: admin, body: { name: value, scopes: ['works:read'] } }),
          422,
          'common.validation_failed',
        );
        expectError(
          await call(app.url, 'POST', `/v1/organizations/${org}/api-keys`, {
            token: admin,
            body: { name: 'k', scopes: ['works:read'], webhook_url: `https://example.test/${value}` },
          }),
          422,
          'common.validation_failed',
        );
      }
      // a query spells them as percent escapes: NUL, a surrogate's CESU-8 bytes, and bytes that are not UTF-8 at all
      for (const escaped of ['a%00b', '%ED%A0%80', '%ED%BF%BF', '%FF', 'ok&network=%00']) {
        expectError(await call(app.url, 'GET', `/v1/works?external_user_ref=${escaped}`, { token: key.token }), 400, 'common.bad_request');
      }
      expect(await app.context.redis.keys(`${app.context.config.redis.prefix}:job:${org}:*`)).to.deep.equal([]);
      expect(await app.context.db('api_keys').where({ organization_id: org }).count<{ count: string }[]>('* as count')).to.deep.equal([
        { count: '1' },
      ]);
      expect(await app.context.queues.prepare.getJobCounts('completed', 'failed', 'active', 'waiting')).to.deep.equal(prepareRunsBefore);
    });

    it('a JSON body that is not UTF-8 is a 400, not text with U+FFFD in it', async () => {
      const key = await createKey(app.context, await createOrg(app.context, 1000));
      const json = Buffer.from(JSON.stringify(initBody({ title: 'XX' })));
      const at = json.indexOf('XX');
      json[at] = 0xc3; // a lead byte followed by an ASCII byte: not UTF-8
      const reply = await call(app.url, 'POST', '/v1/works/init', {
        token: key.token,
        raw: json,
        headers: { 'Content-Type': 'application/json' },
      });
      expect(expectError(reply, 400, 'common.bad_request').message).to.match(/UTF-8/);
      // valid UTF-8 beyond the BMP still passes
      expect(
        (await call(app.url, 'POST', '/v1/works/init', { token: key.token, body: initBody({ title: 'Suite 🎵 für Orgel' }) })).status,
      ).to.equal(200);
    });
  });

  describe('uploads nobody can confirm are deleted', () => {
    it('an upload refused at prepare for its size (too large, empty) is gone from the bucket at once', async () => {
      // a web and a prepare worker of their own, with the limit lowered (it may only be lowered)
      const limited = configWith({ REDIS_PREFIX: `${app.context.config.redis.prefix}_small`, UPLOAD_MAX_BYTES: '1000' });
      const preparer = await startTestWorkers(limited, ['prepare']);
      const smallWeb = await startApp(limited);
      try {
        const org = await createOrg(app.context, 1000);
        const key = await createKey(app.context, org);
        const big = await call(smallWeb.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
        expect((await upload(big.body.upload_url, randomBytes(1001))).status).to.equal(200);
        expect(await stored(app.context, audioKey(org, big.body.job_id))).to.equal(true);
        expectError(
          await call(smallWeb.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: big.body.job_id } }),
          413,
          'registration.audio_too_large',
        );
        expect(await stored(app.context, audioKey(org, big.body.job_id))).to.equal(false);

        const empty = await call(smallWeb.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
        expect((await upload(empty.body.upload_url, Buffer.alloc(0))).status).to.equal(200);
        expectError(
          await call(smallWeb.url, 'POST', '/v1/works/prepare', { token: key.token, body: { job_id: empty.body.job_id } }),
          422,
          'registration.audio_empty',
        );
        expect(await stored(app.context, audioKey(org, empty.body.job_id))).to.equal(false);
      } finally {
        await smallWeb.close();
        await preparer.stop();
      }
    });

    it('an upload whose session expired unprepared is gone after the maintenance job runs; a confirmed one stays', async () => {
      const shortLived = await startApp(configWith({ REDIS_PREFIX: app.context.config.redis.prefix, UPLOAD_TTL_SECONDS: '1' }));
      try {
        const org = await createOrg(app.context, 1000);
        const key = await createKey(app.context, org);
        const init = await call(shortLived.url, 'POST', '/v1/works/init', { token: key.token, body: initBody() });
        // the bytes go in as the partner's upload would leave them: the URL itself lives 1 s from its signing second, which a
        // loaded machine can pass before it uploads (what is tested here is the sweep, not the URL)
        await putObject(app.context.storage, audioKey(org, init.body.job_id), randomBytes(2048), 'application/octet-stream');
        const kept = await quote(app.url, key.token);
        expect((await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: kept.jobId } })).status).to.equal(202);
        // the session lapses on its own clock (the key's TTL)
        await eventually(
          async () =>
            (await app.context.redis.exists(`${app.context.config.redis.prefix}:job:${org}:${init.body.job_id}`)) ? undefined : true,
          'the upload session to expire',
          10_000,
        );
        expect(await stored(app.context, audioKey(org, init.body.job_id))).to.equal(true);

        const sweep = await app.context.queues.maintenance.add('sweep-uploads', {});
        const maintenanceEvents = new QueueEvents('maintenance', {
          connection: createRedis(app.context.config.redis, 'worker', 'job-lifecycle-test-events'),
          prefix: bullPrefix(app.context.config.redis, 'maintenance'),
        });
        try {
          const result = (await sweep.waitUntilFinished(maintenanceEvents, 30_000)) as { deleted: number };
          expect(result.deleted).to.be.at.least(1);
        } finally {
          await maintenanceEvents.close();
        }
        expect(await stored(app.context, audioKey(org, init.body.job_id))).to.equal(false);
        expect(await stored(app.context, audioKey(org, kept.jobId))).to.equal(true);
        expect(await app.context.redis.zscore(`${app.context.config.redis.prefix}:uploads`, audioKey(org, init.body.job_id))).to.equal(
          null,
        );
      } finally {
        await shortLived.close();
      }
    });
  });
});
