import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { JobStore } from '../../shared/registration/job-store';
import { startApp, call, expectError, type TestApp } from '../helpers/app';
import { createOrg, createKey, suspendOrg } from '../helpers/factories';
import { adminToken } from '../helpers/identity';
import { initBody } from '../helpers/registration';
import { configWith, testServices } from '../helpers/services';
import { setOrganizationStatus } from '../../shared/organizations/service';
import { lookupPacked, packWrite } from '../../shared/api-keys/key-cache';
import { hashToken } from '../../shared/api-keys/token';

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

  describe("the upload session written in the key check's round trip", () => {
    interface Seen {
      readonly args: string[];
      readonly source: string;
    }
    // every command Redis runs, from clients and from scripts, in the order it runs them
    let monitor: Redis;
    let seen: Seen[] = [];
    before(async () => {
      monitor = await new Redis(testServices().config.redis.url).monitor();
      monitor.on('monitor', (_time: string, args: string[], source: string) => seen.push({ args, source }));
    });
    after(() => monitor?.disconnect());

    /** The commands Redis ran while `during` ran (a marker sent after it closes the window). */
    async function commandsOf(during: () => Promise<unknown>): Promise<Seen[]> {
      seen = [];
      await during();
      const marker = `marker-${randomUUID()}`;
      const closed = new Promise<void>((resolve) =>
        monitor.on('monitor', (_t: string, args: string[]) => args.includes(marker) && resolve()),
      );
      await app.context.redis.echo(marker);
      await closed;
      return seen;
    }

    const jobs = () => new JobStore(app.context.redis, testServices().config.redis.prefix);
    const uploadsOf = async (org: string) =>
      (await app.context.redis.zrange(jobs().uploadsKey(), '0', '-1')).filter((member) => member.startsWith(`audio/${org}/`));

    it("a known key's init makes one call to Redis: the key, the token and the session in one script", async () => {
      const org = await createOrg(app.context);
      const key = await createKey(app.context, org);
      expect((await init(app.url, key.token)).status).to.equal(200);
      let reply: Awaited<ReturnType<typeof init>> | undefined;
      const commands = await commandsOf(async () => (reply = await init(app.url, key.token)));
      expect(reply!.status, reply!.text).to.equal(200);
      const jobId = reply!.body.job_id as string;
      const naming = (source: (s: string) => boolean) => commands.filter((c) => source(c.source) && c.args.some((a) => a.includes(jobId)));
      const fromClients = naming((source) => source !== 'lua');
      expect(fromClients, 'client commands naming the job').to.have.length(1);
      expect(
        fromClients[0]!.args.some((a) => a.includes(':apikey:')),
        'the same call reads the key',
      ).to.equal(true);
      const inScript = naming((source) => source === 'lua').map((c) => [c.args[0]!.toUpperCase(), c.args[1]]);
      expect(inScript).to.deep.include(['HSET', jobs().key(org, jobId)]);
      expect(inScript).to.deep.include(['ZADD', jobs().uploadsKey()]);
      const job = await jobs().load(org, jobId);
      expect(job?.state).to.equal('reserved');
      expect(job?.session).to.include({ organizationId: org, apiKeyId: key.id, audioKey: `audio/${org}/${jobId}`, jobId });
      // the session's JSON is the one layout every version of the code reads, caller and object key included
      const stored = JSON.parse((await app.context.redis.hget(jobs().key(org, jobId), 'session'))!);
      expect(stored).to.include({ organizationId: org, apiKeyId: key.id, audioKey: `audio/${org}/${jobId}`, jobId, kind: 'register' });
      expect(await uploadsOf(org)).to.include(`audio/${org}/${jobId}`);
    });

    it("a caller's text is stored as sent, whether the key check or PostgreSQL admitted it", async () => {
      const org = await createOrg(app.context);
      const key = await createKey(app.context, org);
      // the placeholders the script replaces are these characters unescaped; JSON escapes them, so they stay text;
      // the write reaches the script as length-prefixed items, so lengths in bytes and colons are in the text too
      const title = 'Título 3:4 \u0001o and \u0001k, 🎵 12:';
      const body = initBody({ title, external_user_ref: 'ref \u0001o', creators: [{ full_name: '\u0001k', roles: { author: true } }] });
      // the process without PostgreSQL answers only if the key check's script made the write itself
      for (const [through, base] of [
        ['PostgreSQL', app.url],
        ['the key check', noDatabase.url],
      ] as const) {
        const reply = await call(base, 'POST', '/v1/works/init', { token: key.token, body });
        expect(reply.status, `${through}: ${reply.text}`).to.equal(200);
        const job = await jobs().load(org, reply.body.job_id);
        expect(job?.session, through).to.deep.include({ title, externalUserRef: 'ref \u0001o', organizationId: org, apiKeyId: key.id });
        expect(job?.session.creators[0]?.full_name, through).to.equal('\u0001k');
      }
    });

    it('a malformed admitted write makes none of itself: the script reads all of it before running any', async () => {
      const org = await createOrg(app.context);
      const key = await createKey(app.context, org);
      expect((await init(app.url, key.token)).status, 'the key known to Redis').to.equal(200);
      const target = `${testServices().config.redis.prefix}:test-malformed:${randomUUID()}`;
      const whole = packWrite([['set', target, 'made']]);
      const run = (packed: string) => lookupPacked(app.context, hashToken(key.token), undefined, { scope: 'works:register', packed });
      // a second command: an argument's length negative, past the end, not a number; an argument missing
      for (const bad of [`${whole}1:21:x-1:y`, `${whole}1:199:set`, `${whole}1:1x:set`, `${whole}1:25:hello`]) {
        const error = await run(bad).then(
          () => undefined,
          (err: Error) => err,
        );
        expect(error?.message, bad).to.match(/malformed admitted write/);
        expect(await app.context.redis.exists(target), `${bad}: the well-formed first command did not run`).to.equal(0);
      }
      expect(await run(whole), 'the same write well formed').to.deep.include({ kind: 'found', written: true });
      expect(await app.context.redis.get(target)).to.equal('made');
      await app.context.redis.del(target);
    });

    it('a refused init writes nothing: rate limited, without the scope, suspended, revoked', async () => {
      const limited = await startApp(configWith({ RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '1' }));
      try {
        const org = await createOrg(app.context);
        const key = await createKey(app.context, org);
        const reader = await createKey(app.context, org, ['works:read']);
        expect((await init(limited.url, key.token)).status).to.equal(200);
        expectError(await init(limited.url, key.token), 429, 'organization.rate_limited');
        expectError(await init(app.url, reader.token), 403, 'auth.insufficient_scope');
        expectError(await init(app.url, reader.token), 403, 'auth.insufficient_scope');
        await suspendOrg(app.context, org);
        expectError(await init(app.url, key.token), 403, 'organization.inactive');
        await setOrganizationStatus(app.context, org, 'active');
        const admin = await adminToken({ organizationId: org });
        expect((await call(app.url, 'DELETE', `/v1/organizations/${org}/api-keys/${key.id}`, { token: admin })).status).to.equal(204);
        expectError(await init(app.url, key.token), 401, 'auth.unauthorized');
        expect(await uploadsOf(org), 'one upload: the first init only').to.have.length(1);
      } finally {
        await limited.close();
      }
    });
  });
});
