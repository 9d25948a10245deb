import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { Client } from 'pg';
import { call, eventually, type TestApp } from '../helpers/app';
import { createOrg, createKey, insertWorks } from '../helpers/factories';
import { addVersion, initBody, register } from '../helpers/registration';
import { useOwnDatabase } from '../helpers/services';
import { useStack } from '../helpers/workers';
import { pageOfWorks } from '../../shared/works/repo';

/**
 * GET /v1/works's total_count comes from work_counts without a ref (migration 20261122060000) and from
 * work_ref_counts with one (20261207000000), both kept by triggers on works: it must answer exactly what counting
 * the rows answers, whatever wrote them.
 */
describe('GET /v1/works: total_count from the maintained counts', function () {
  this.timeout(240_000);
  const stack = useStack({ env: { REDIS_PREFIX: `works_count_${Date.now()}` } });
  let app: TestApp;
  before(() => (app = stack.app));

  const list = async (token: string, query = '') => {
    const reply = await call(app.url, 'GET', `/v1/works${query}`, { token });
    expect(reply.status, reply.text).to.equal(200);
    return reply.body.total_count as number;
  };
  const rows = async (org: string, where: Record<string, string> = {}, db: Knex = app.context.db) =>
    Number(
      (
        await db('works')
          .where({ organization_id: org, ...where })
          .count<{ count: string }[]>('* as count')
      )[0]!.count,
    );

  /**
   * Every listing shape answers the count of the rows under the same filter: without a ref, and for each ref the
   * organization's works have, or `extraRefs` name, alone and on each network (a ref without works there: 404).
   */
  async function expectExact(org: string, token: string, extraRefs: readonly string[] = []): Promise<void> {
    expect(await list(token), 'all networks').to.equal(await rows(org));
    for (const network of ['testnet', 'mainnet'])
      expect(await list(token, `?network=${network}`), network).to.equal(await rows(org, { network }));
    const refs = (
      await app.context.db('works').where({ organization_id: org }).whereNotNull('external_user_ref').distinct('external_user_ref')
    ).map((r) => r.external_user_ref as string);
    for (const ref of new Set([...refs, ...extraRefs]))
      for (const network of [undefined, 'testnet', 'mainnet']) {
        const query = `?external_user_ref=${encodeURIComponent(ref)}${network ? `&network=${network}` : ''}`;
        const expected = await rows(org, { external_user_ref: ref, ...(network ? { network } : {}) });
        if (expected > 0) expect(await list(token, query), query).to.equal(expected);
        else expect((await call(app.url, 'GET', `/v1/works${query}`, { token })).status, query).to.equal(404);
      }
  }

  function settled(txId: string) {
    return eventually(
      async () => {
        const row = await app.context.db('transactions').where({ id: txId }).first();
        return row.status === 'finalized' || row.status === 'failed' ? row : undefined;
      },
      `transaction ${txId} to settle`,
      120_000,
    );
  }

  it('counts registrations as they finalize (concurrently), not a new version, and no other organization’s', async () => {
    const [a, b] = [await createOrg(app.context, 100_000), await createOrg(app.context, 100_000)];
    const [keyA, keyB] = [await createKey(app.context, a), await createKey(app.context, b)];
    expect(await list(keyA.token)).to.equal(0);

    const bodies = [
      initBody({ external_user_ref: 'alice' }),
      initBody({ external_user_ref: 'alice' }),
      initBody(),
      initBody({ external_user_ref: 'bob' }),
    ];
    const registered = await Promise.all(bodies.map((body) => register(app.url, keyA.token, body)));
    const ofB = await register(app.url, keyB.token, initBody({ external_user_ref: 'alice' }));
    const txs = await Promise.all([...registered, ofB].map((r) => settled(r.confirm.body.transaction_id)));
    expect(txs.map((t) => t.status)).to.deep.equal(['finalized', 'finalized', 'finalized', 'finalized', 'finalized']);

    expect(await list(keyA.token)).to.equal(4);
    expect(await list(keyA.token, '?network=testnet')).to.equal(4);
    expect(await list(keyA.token, '?network=mainnet')).to.equal(0);
    expect(await list(keyA.token, '?external_user_ref=alice')).to.equal(2);
    expect(await list(keyA.token, '?external_user_ref=bob&network=testnet')).to.equal(1);
    expect(await list(keyB.token)).to.equal(1);
    expect(await list(keyB.token, '?external_user_ref=alice')).to.equal(1);
    await expectExact(a, keyA.token);
    await expectExact(b, keyB.token);

    // a new version updates the work's row; the work is counted once still
    const v2 = await addVersion(app.url, keyA.token, Number(txs[2]!.ats_id), { network: 'testnet', creators: bodies[2]!.creators });
    expect((await settled(v2.confirm.body.transaction_id)).status).to.equal('finalized');
    expect(await list(keyA.token)).to.equal(4);
    await expectExact(a, keyA.token);
  });

  it('equals a count of the rows through bulk inserts over two organizations, deletes and moves', async () => {
    const [a, b] = [await createOrg(app.context), await createOrg(app.context)];
    const [tokenA, tokenB] = [
      (await createKey(app.context, a, ['works:read'])).token,
      (await createKey(app.context, b, ['works:read'])).token,
    ];
    const db = app.context.db;
    const check = async () => {
      await expectExact(a, tokenA, ['alice', 'carol', 'dave']);
      await expectExact(b, tokenB, ['alice', 'carol', 'dave']);
    };

    await insertWorks(app.context, a, 1200); // three statements of up to 500 rows
    await insertWorks(app.context, a, 30, { network: 'mainnet', externalUserRef: 'alice' });
    await insertWorks(app.context, b, 7);
    await check();
    expect(await list(tokenA)).to.equal(1230);

    // one statement over both organizations and both networks
    const base = async (network: string) =>
      Number((await db('ats_counters').where({ network }).increment('next_id', 40).returning('next_id'))[0].next_id) - 41;
    await db.raw(
      `INSERT INTO works (id, organization_id, network, ats_id, owner, title, asset_filename, latest_version, latest_commitment, external_user_ref, has_files, created_at, latest_version_at)
       SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN ?::uuid ELSE ?::uuid END, CASE WHEN g % 5 = 0 THEN 'mainnet' ELSE 'testnet' END,
              CASE WHEN g % 5 = 0 THEN ?::bigint ELSE ?::bigint END + g, '5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY',
              'Work ' || g, 'w.wav', 1, '0x' || md5(g::text) || md5((g + 1)::text), CASE WHEN g % 3 = 0 THEN 'carol' END, true, now(), now()
       FROM generate_series(1, 40) AS g`,
      [a, b, await base('mainnet'), await base('testnet')],
    );
    await check();
    expect(await list(tokenB)).to.equal(27);

    // the index is written only by finalization; by hand, a delete or a move is still counted exactly
    await db('works')
      .whereIn('id', db('works').where({ organization_id: a, network: 'testnet' }).limit(100).select('id'))
      .del();
    await check();
    await db('works')
      .where({ organization_id: a, network: 'mainnet', external_user_ref: 'alice' })
      .update({ network: 'testnet', ats_id: db.raw('ats_id + 1000000000') });
    await check();
    await db('works')
      .whereIn('id', db('works').where({ organization_id: b }).limit(3).select('id'))
      .update({ organization_id: a });
    await check();
    await db('works').where({ organization_id: b }).update({ title: 'renamed', latest_version: 2 });
    await check();
    // the service never changes a work's ref; by hand, a ref given, changed and taken away is counted exactly
    await db('works')
      .whereIn('id', db('works').where({ organization_id: a }).whereNull('external_user_ref').limit(5).select('id'))
      .update({ external_user_ref: 'dave' });
    await db('works').where({ organization_id: a, external_user_ref: 'carol' }).update({ external_user_ref: 'dave' });
    await db('works')
      .whereIn('id', db('works').where({ organization_id: a, external_user_ref: 'dave' }).limit(2).select('id'))
      .update({ external_user_ref: null });
    await check();
    expect(await rows(a, { external_user_ref: 'carol' })).to.equal(0);
    expect(await rows(a, { external_user_ref: 'dave' })).to.be.greaterThan(3);
    expect(await list(tokenA)).to.equal(1230 + 20 - 100 + 3);
    expect(await list(tokenB)).to.equal(27 - 3);
    expect(await list(tokenA, '?external_user_ref=alice&network=testnet')).to.equal(30);

    // inserted on one connection, deleted on another (another counter slot, which goes below zero)
    const [first] = await db('works').where({ organization_id: b }).limit(1);
    await db.transaction(async (holding) => {
      await holding.raw('SELECT 1'); // keeps its connection, so the delete below runs on another
      await db('works').where({ id: first.id }).del();
      await holding('works').insert({ ...first, id: randomUUID(), ats_id: Number(first.ats_id) + 2_000_000_000 });
    });
    await db('works')
      .whereIn('id', db('works').where({ organization_id: b }).limit(2).select('id'))
      .del();
    await check();
    expect(await list(tokenB)).to.equal(27 - 3 - 2);

    // a failed statement leaves the count as it was
    const before = await list(tokenA);
    const [existing] = await db('works').where({ organization_id: a }).limit(1);
    await db
      .transaction(async (trx) => {
        await trx('works').insert({ ...existing, id: randomUUID(), ats_id: Number(existing.ats_id) + 10_000_000 });
        await trx('works').insert(existing); // duplicate id: the transaction fails
      })
      .catch(() => undefined);
    expect(await list(tokenA)).to.equal(before);
    await check();
  });

  it('moves a work to another ref by hand behind an insert on its counter slot, not into a deadlock with it', async () => {
    const org = await createOrg(app.context);
    const token = (await createKey(app.context, org, ['works:read'])).token;
    const [moved] = await insertWorks(app.context, org, 1, { externalUserRef: 'frank' });
    const [reserved] = await app.context.db('ats_counters').where({ network: 'testnet' }).increment('next_id', 2).returning('next_id');
    const insert = (client: Client, atsId: number, ref: string) =>
      client
        .query(
          `INSERT INTO works (id, organization_id, network, ats_id, owner, title, asset_filename, latest_version, latest_commitment, external_user_ref, has_files, created_at, latest_version_at)
           VALUES ($1, $2, 'testnet', $3, 'owner', 'Work', 'w.wav', 1, '0x' || repeat('ab', 32), $4, true, now(), now())`,
          [randomUUID(), org, atsId, ref],
        )
        .then(
          () => 'inserted',
          (err: Error) => err.message,
        );
    // two backends on one counter slot (pid % 16): among 17 connections, two are
    const clients: Client[] = [];
    try {
      const bySlot = new Map<number, { client: Client; pid: number }>();
      let pair: [{ client: Client; pid: number }, { client: Client; pid: number }] | undefined;
      while (!pair) {
        const client = new Client({ connectionString: app.context.config.database.url });
        clients.push(client);
        await client.connect();
        const pid = Number((await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
        const other = bySlot.get(pid % 16);
        if (other) pair = [other, { client, pid }];
        else bySlot.set(pid % 16, { client, pid });
      }
      const [mover, inserter] = pair;
      await mover.client.query('BEGIN');
      await mover.client.query(`UPDATE works SET external_user_ref = 'grace' WHERE id = $1`, [moved]);
      await inserter.client.query('BEGIN');
      const inserted = insert(inserter.client, Number(reserved.next_id) - 2, 'frank');
      await eventually(
        async () =>
          (await app.context.db.raw('SELECT wait_event_type FROM pg_stat_activity WHERE pid = ?', [inserter.pid])).rows[0]
            ?.wait_event_type === 'Lock' || undefined,
        'the insert to wait for the move',
        10_000,
      );
      // the mover's own insert on the slot: had the insert taken the slot before the move's ref counter, a deadlock
      expect(await insert(mover.client, Number(reserved.next_id) - 1, 'heidi')).to.equal('inserted');
      await mover.client.query('COMMIT');
      expect(await inserted).to.equal('inserted');
      await inserter.client.query('COMMIT');
    } finally {
      await Promise.all(clients.map((client) => client.end().catch(() => undefined)));
    }
    await expectExact(org, token, ['frank', 'grace', 'heidi']);
    expect(await list(token, '?external_user_ref=grace')).to.equal(1);
    expect(await list(token, '?external_user_ref=frank')).to.equal(1);
  });

  for (const [table, row] of [
    ['work_counts', { network: 'mainnet' }],
    ['work_ref_counts', { external_user_ref: 'erin', network: 'mainnet' }],
  ] as const)
    it(`refuses any write to ${table} but the triggers’`, async () => {
      const org = await createOrg(app.context);
      await insertWorks(app.context, org, 3, { externalUserRef: 'erin' });
      const db = app.context.db;
      const attempts: (() => Promise<unknown>)[] = [
        () => db(table).where({ organization_id: org }).update({ works: 99 }),
        () => db(table).where({ organization_id: org }).del(),
        () => db(table).insert({ organization_id: org, ...row, slot: 0, works: 5 }),
        () => db.raw(`TRUNCATE ${table}`),
      ];
      for (const attempt of attempts) {
        const err = await attempt().then(
          () => undefined,
          (e: Error) => e,
        );
        expect(err?.message).to.match(new RegExp(`${table} changes only through the triggers on works`));
      }
      expect(Number((await db(table).where({ organization_id: org }).sum('works as works'))[0]!.works)).to.equal(3);
    });

  describe('the migration, on a database of its own', () => {
    const ownDb = useOwnDatabase('works_count');
    let db: Knex;
    before(() => (db = ownDb()));

    const counts = async () =>
      (
        await db('work_counts')
          .groupBy('organization_id', 'network')
          .orderBy(['organization_id', 'network'])
          .select('organization_id', 'network', db.raw('sum(works) AS works'))
      ).map((r) => [r.organization_id, r.network, Number(r.works)]);
    const rowCounts = async () =>
      (
        await db('works')
          .groupBy('organization_id', 'network')
          .orderBy(['organization_id', 'network'])
          .select('organization_id', 'network', db.raw('count(*) AS works'))
      ).map((r) => [r.organization_id, r.network, Number(r.works)]);

    it('counts the works already there, and TRUNCATE empties the counts', async () => {
      await db.migrate.latest();
      await db.migrate.down({ name: '20261122060000_work_counts.ts' });
      expect(await db.schema.hasTable('work_counts')).to.equal(false);

      const orgs = (
        await db('organizations')
          .insert([{ name: 'one' }, { name: 'two' }, { name: 'three' }])
          .returning('id')
      ).map((r) => r.id as string);
      await db.raw(
        `INSERT INTO works (id, organization_id, network, ats_id, owner, title, asset_filename, latest_version, latest_commitment, has_files, created_at, latest_version_at)
         SELECT gen_random_uuid(), (?::uuid[])[1 + g % 2], CASE WHEN g % 3 = 0 THEN 'mainnet' ELSE 'testnet' END, g, 'owner', 'Work', 'w.wav', 1, '0x00', true, now(), now()
         FROM generate_series(1, 500) AS g`,
        [orgs],
      );
      await db.migrate.latest();
      expect(await counts()).to.deep.equal(await rowCounts());
      expect((await counts()).reduce((sum, [, , n]) => sum + (n as number), 0)).to.equal(500);

      await db.raw('TRUNCATE works CASCADE');
      expect(await counts()).to.deep.equal([]);
      // the organization without works can go: its counts go with it
      await db('works').insert({
        id: randomUUID(),
        organization_id: orgs[2],
        network: 'testnet',
        ats_id: 1,
        owner: 'o',
        title: 't',
        asset_filename: 'w.wav',
        latest_version: 1,
        latest_commitment: '0x00',
        created_at: db.fn.now(),
        latest_version_at: db.fn.now(),
      });
      await db('works').where({ organization_id: orgs[2] }).del();
      expect(await counts()).to.deep.equal([[orgs[2], 'testnet', 0]]);
      await db('organizations').where({ id: orgs[2] }).del();
      expect(await counts()).to.deep.equal([]);
    });

    const refCounts = async () =>
      (
        await db('work_ref_counts')
          .groupBy('organization_id', 'external_user_ref', 'network')
          .orderBy(['organization_id', 'external_user_ref', 'network'])
          .select('organization_id', 'external_user_ref', 'network', db.raw('sum(works) AS works'))
      ).map((r) => [r.organization_id, r.external_user_ref, r.network, Number(r.works)]);
    const refRowCounts = async () =>
      (
        await db('works')
          .whereNotNull('external_user_ref')
          .groupBy('organization_id', 'external_user_ref', 'network')
          .orderBy(['organization_id', 'external_user_ref', 'network'])
          .select('organization_id', 'external_user_ref', 'network', db.raw('count(*) AS works'))
      ).map((r) => [r.organization_id, r.external_user_ref, r.network, Number(r.works)]);

    it('counts the refs of the works already there, keeps counting, and goes down and up again', async () => {
      await db.migrate.latest();
      await db.migrate.down({ name: '20261207000000_work_ref_counts.ts' });
      expect(await db.schema.hasTable('work_ref_counts')).to.equal(false);
      const org = (await db('organizations').insert({ name: 'refs' }).returning('id'))[0].id as string;
      const insert = (from: number, to: number) =>
        db.raw(
          `INSERT INTO works (id, organization_id, network, ats_id, owner, title, asset_filename, latest_version, latest_commitment, external_user_ref, has_files, created_at, latest_version_at)
           SELECT gen_random_uuid(), ?::uuid, CASE WHEN g % 3 = 0 THEN 'mainnet' ELSE 'testnet' END, g, 'owner', 'Work', 'w.wav', 1, '0x00',
                  CASE WHEN g % 4 = 0 THEN NULL ELSE 'user-' || (g % 5) END, true, now(), now()
           FROM generate_series(?::int, ?::int) AS g`,
          [org, from, to],
        );
      await insert(1_000_001, 1_000_600);
      await db.migrate.latest();
      const backfilled = await refCounts();
      expect(backfilled).to.deep.equal(await refRowCounts());
      // 600 works, a quarter without a ref
      expect(backfilled.reduce((sum, [, , , n]) => sum + (n as number), 0)).to.equal(450);

      await insert(1_000_601, 1_000_900);
      await db('works').where({ organization_id: org, external_user_ref: 'user-1' }).del();
      const after = await refCounts();
      expect(after.filter(([, , , n]) => n !== 0)).to.deep.equal(await refRowCounts());
      // user-1's counter rows stay, at zero
      expect(after.filter(([, ref]) => ref === 'user-1').map(([, , network, n]) => [network, n])).to.deep.equal([
        ['mainnet', 0],
        ['testnet', 0],
      ]);

      await db.migrate.down({ name: '20261207000000_work_ref_counts.ts' });
      expect(await db.schema.hasTable('work_ref_counts')).to.equal(false);
      // written while no trigger counts: the backfill of the next up counts it
      await db('works')
        .whereIn('id', db('works').where({ organization_id: org, external_user_ref: 'user-2' }).limit(3).select('id'))
        .del();
      await db.migrate.latest();
      expect(await refCounts()).to.deep.equal(await refRowCounts());

      // the listing reads the counters, not the rows: a counter set by hand (its guard off) is what it answers
      const page = await pageOfWorks(db, { organizationId: org, externalUserRef: 'user-3' }, 20);
      expect(page.totalCount).to.equal(await rows(org, { external_user_ref: 'user-3' }, db));
      await db.raw('ALTER TABLE work_ref_counts DISABLE TRIGGER work_ref_counts_guard');
      await db('work_ref_counts').where({ organization_id: org, external_user_ref: 'user-3', network: 'testnet' }).increment('works', 1000);
      await db.raw('ALTER TABLE work_ref_counts ENABLE TRIGGER work_ref_counts_guard');
      expect((await pageOfWorks(db, { organizationId: org, externalUserRef: 'user-3' }, 20)).totalCount).to.equal(page.totalCount + 1000);
      expect((await pageOfWorks(db, { organizationId: org, externalUserRef: 'user-3', network: 'mainnet' }, 20)).totalCount).to.equal(
        await rows(org, { external_user_ref: 'user-3', network: 'mainnet' }, db),
      );

      await db.raw('TRUNCATE works CASCADE');
      expect(await refCounts()).to.deep.equal([]);
    });
  });
});
