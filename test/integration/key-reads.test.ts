import { setImmediate as turn } from 'node:timers/promises';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { startApp, type TestApp } from '../helpers/app';
import { createOrg, createKey, suspendOrg } from '../helpers/factories';
import { checkApiKey, revokeApiKey, type KeyCheck, type KeyCheckDeps } from '../../shared/api-keys/service';
import { JOIN_WAIT_MS, KeyReads } from '../../shared/api-keys/key-reads';
import { findKeyByHash } from '../../shared/api-keys/repo';
import { hashToken } from '../../shared/api-keys/token';
import type { AppError } from '../../shared/errors';

/**
 * A key's checks that find no record in Redis at once share one PostgreSQL read (shared/api-keys/key-reads.ts),
 * and each asks Redis again once it settled: what a suspension or a revocation answered meanwhile holds for
 * them, though the read they waited for saw the key before it.
 */
describe('API key checks sharing a PostgreSQL read', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app?.close());

  /** KeyReads that counts the checks that joined a read (`joined` waits on it). */
  class CountedReads extends KeyReads {
    joins = 0;
    override join(hash: Buffer) {
      const joining = super.join(hash);
      if (joining) this.joins += 1;
      return joining;
    }
  }

  /** The real read, counted; the first one held after it read, until `release`, when `holdFirst`. */
  function heldReads(holdFirst: boolean, failFirst = false, redis = app.context.redis) {
    let release!: () => void;
    let readDone!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const firstRead = new Promise<void>((resolve) => (readDone = resolve));
    let calls = 0;
    const reads = new CountedReads(async (hash) => {
      const first = ++calls === 1;
      const found = await findKeyByHash(app.context.db, hash);
      if (first && holdFirst) {
        readDone();
        await released;
        if (failFirst) throw new Error('the connection went away');
      }
      return found;
    });
    const deps: KeyCheckDeps = { db: app.context.db, redis, config: app.context.config, keyReads: reads };
    return { deps, reads, release, firstRead, calls: () => calls };
  }

  const refusal = (check: Promise<KeyCheck>) =>
    check.then(
      () => 'admitted',
      (err: AppError | Error) => ('code' in err ? err.code : err.message),
    );

  /** A new key whose first check's read is held once it has read; `check` starts another, `joined` waits for one to join. */
  async function heldFirstCheck(failFirst = false) {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    const held = heldReads(true, failFirst);
    const first = refusal(checkApiKey(held.deps, key.token));
    await held.firstRead;
    const check = () => refusal(checkApiKey(held.deps, key.token));
    const joined = async () => {
      const deadline = Date.now() + 10_000;
      while (held.reads.joins < 1) {
        if (Date.now() > deadline) throw new Error('no check joined the read under way');
        await turn();
      }
    };
    return { ...held, org, key, first, check, joined };
  }

  it('twenty checks of a key Redis does not know, begun together, read PostgreSQL once and take their tokens from Redis', async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    const { deps, calls } = heldReads(false);
    const take = { perSecond: 1_000, burst: 1_000, scope: 'works:register' as const };
    const checks = await Promise.all(Array.from({ length: 20 }, () => checkApiKey(deps, key.token, take)));
    expect(calls()).to.equal(1);
    for (const check of checks) expect(check.principal).to.include({ kind: 'api_key', apiKeyId: key.id, organizationId: org });
    // the read's own check answered from PostgreSQL (no token asked of the bucket); the nineteen that joined, from Redis
    expect(checks.filter((c) => c.token?.taken === true)).to.have.length(19);
    expect(checks.filter((c) => c.token === undefined)).to.have.length(1);
  });

  it("a key known to Redis whose organization's status expired: twenty checks read PostgreSQL once, and those that joined make their admitted write", async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    const { deps, reads, calls } = heldReads(false);
    await checkApiKey(deps, key.token); // the key's and the status's records filled
    const prefix = app.context.config.redis.prefix;
    await app.context.redis.del(`${prefix}:org-status:${org}`);
    const counter = `${prefix}:test-admitted-writes:${org}`;
    const write = { scope: 'works:register' as const, commands: [['INCR', counter]] };
    try {
      const checks = await Promise.all(Array.from({ length: 20 }, () => checkApiKey(deps, key.token, undefined, write)));
      expect(calls()).to.equal(2);
      expect(reads.joins).to.equal(19);
      // the write is made by the script only for a check Redis answered; the reading check's is the caller's to make
      expect(checks.filter((c) => c.written === true)).to.have.length(19);
      expect(Number(await app.context.redis.get(counter))).to.equal(19);
    } finally {
      await app.context.redis.del(counter);
    }
  });

  it('with Redis away no check waits on another: each reads PostgreSQL at once', async () => {
    const org = await createOrg(app.context);
    const key = await createKey(app.context, org);
    const away = new Redis({ port: 1, lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
    away.on('error', () => undefined);
    try {
      const { deps, reads, calls } = heldReads(false, false, away);
      const checks = await Promise.all(Array.from({ length: 5 }, () => checkApiKey(deps, key.token)));
      for (const check of checks) expect(check.principal.apiKeyId).to.equal(key.id);
      expect(reads.joins).to.equal(0);
      expect(calls()).to.equal(5);
    } finally {
      away.disconnect();
    }
  });

  it('a suspension answered while the shared read, which found the organization active, is held refuses the check that joined it', async () => {
    const { org, first, check, joined, release, calls } = await heldFirstCheck();
    await suspendOrg(app.context, org);
    const later = check();
    await joined();
    release();
    // the first began before the suspension answered; the later one after it, and must see it
    expect(await first).to.equal('admitted');
    expect(await later).to.equal('organization.inactive');
    expect(calls(), 'the later check read no PostgreSQL of its own').to.equal(1);
  });

  it('a revocation answered while a check waits on the shared read, which found the key active, is seen by that check', async () => {
    const { org, key, deps, first, check, joined, release, calls } = await heldFirstCheck();
    const later = check();
    await joined();
    await revokeApiKey(deps, org, key.id);
    release();
    expect(await first).to.equal('admitted');
    expect(await later).to.equal('auth.unauthorized');
    expect(calls()).to.equal(1);
    // and every check after them: the fill that followed the read did not undo the revocation's record
    expect(await check()).to.equal('auth.unauthorized');
    expect(calls()).to.equal(1);
  });

  it(`a read that hangs holds the checks that joined it ${JOIN_WAIT_MS} ms at most: they read PostgreSQL themselves`, async () => {
    const { key, reads, first, check, joined, release, calls } = await heldFirstCheck();
    const started = Date.now();
    const later = check();
    await joined();
    expect(await later).to.equal('admitted');
    expect(Date.now() - started).to.be.at.least(JOIN_WAIT_MS);
    expect(calls()).to.equal(2);
    // and, still hanging, it is no longer joined: the next check starts a read of its own at once
    expect(reads.join(hashToken(key.token))).to.equal(undefined);
    release();
    expect(await first).to.equal('admitted');
  });

  it('a shared read that fails fails only its own check: the one that joined it reads PostgreSQL itself', async () => {
    const { first, check, joined, release, calls } = await heldFirstCheck(true);
    const later = check();
    await joined();
    release();
    expect(await later).to.equal('admitted');
    expect(await first).to.equal('the connection went away');
    expect(calls()).to.equal(2);
  });
});
