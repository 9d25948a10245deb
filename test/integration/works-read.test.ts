import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startApp, call, expectError, type TestApp } from '../helpers/app';
import { createOrg, createKey, insertWorks } from '../helpers/factories';
import type { Knex } from 'knex';
import { listWorks } from '../../shared/works/service';
import { pageStatement } from '../../shared/works/repo';
import type { Principal } from '../../shared/api-keys/types';

/** GET /v1/works (docs/api.md#listing-and-cursors, docs/api.md#sessions) over works inserted straight into the index. */
describe('GET /v1/works: the listing', function () {
  this.timeout(120_000);
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  const list = (token: string, query = '') => call(app.url, 'GET', `/v1/works${query}`, { token });

  /** Works of the organization as the listing must order them: newest first, then id. */
  const expectedOrder = async (org: string): Promise<string[]> =>
    (
      await app.context
        .db('works')
        .where({ organization_id: org })
        .orderBy([
          { column: 'created_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .select('id')
    ).map((r) => r.id);

  /** 250 works: 100 sharing one timestamp (ties broken by id), 100 a few microseconds apart, 50 in groups of five a second apart. */
  async function organizationWith250(): Promise<{ org: string; token: string }> {
    const org = await createOrg(app.context);
    await insertWorks(app.context, org, 50, { ageSeconds: (i) => 10 + Math.floor(i / 5) });
    await insertWorks(app.context, org, 100, { ageSeconds: (i) => 1 + i * 0.000007 });
    await insertWorks(app.context, org, 100);
    return { org, token: (await createKey(app.context, org, ['works:read'])).token };
  }

  for (const first of [1, 7, 100]) {
    it(`pages through 250 works ${first} at a time, each exactly once, while new works arrive between pages`, async () => {
      const { org, token } = await organizationWith250();
      const original = await expectedOrder(org);
      expect(original).to.have.length(250);
      const seen: string[] = [];
      const arrived: string[] = [];
      let after: string | undefined;
      let pages = 0;
      for (;;) {
        const reply = await list(token, `?first=${first}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
        expect(reply.status).to.equal(200);
        const { works, page_info: info, total_count: total } = reply.body;
        pages++;
        expect(works.length).to.be.at.most(first);
        expect(total).to.equal(250 + arrived.length);
        expect(info.has_previous_page).to.equal(after !== undefined);
        expect(info.start_cursor).to.be.a('string');
        expect(info.end_cursor).to.be.a('string');
        seen.push(...works.map((w: { id: string }) => w.id));
        if (!info.has_next_page) break;
        after = info.end_cursor;
        // two newer works land between every two pages (a bulk insert of two, then one alone)
        arrived.push(...(await insertWorks(app.context, org, pages % 2 ? 2 : 1)));
      }
      expect(pages).to.equal(Math.ceil(250 / first));
      expect(new Set(seen).size, 'no duplicates').to.equal(seen.length);
      expect(seen, 'every original work once, in order, and none of the newer ones').to.deep.equal(original);
      // the first page, asked again, starts with the newest arrivals
      const again = await list(token, `?first=${first}`);
      expect(again.body.total_count).to.equal(250 + arrived.length);
      expect(again.body.works[0].id).to.equal((await expectedOrder(org))[0]);
    });
  }

  it('answers a page and its total_count from one snapshot: a page holding every work agrees with its count while works arrive', async () => {
    const org = await createOrg(app.context);
    const principal: Principal = { kind: 'api_key', apiKeyId: randomUUID(), organizationId: org, scopes: ['works:read'] };
    await insertWorks(app.context, org, 1, { externalUserRef: 'snap' });
    const counts: number[] = [];
    // one work at a time, each its own commit, half of them the ref's, and three pages read while it commits (the
    // organization's, the ref's, the network's): their counts move under the pages being read
    for (let i = 0; i < 90; i++) {
      const [, ...pages] = await Promise.all([
        insertWorks(app.context, org, 1, { externalUserRef: i % 2 ? 'snap' : undefined }),
        listWorks(app.context.db, principal, { first: 100 }),
        listWorks(app.context.db, principal, { first: 100, external_user_ref: 'snap' }),
        listWorks(app.context.db, principal, { first: 100, network: 'testnet' }),
      ]);
      for (const page of pages) {
        expect(page.works.length, 'the page holds every work it counts').to.equal(page.totalCount);
        expect(page.pageInfo.hasNextPage).to.equal(false);
        counts.push(page.totalCount);
      }
    }
    // the pages were read from the first works to the last
    expect(Math.min(...counts)).to.be.at.most(2);
    expect(Math.max(...counts)).to.be.at.least(90);
  });

  it('answers every work with the fields of docs/api.md#listing-and-cursors, 20 by default', async () => {
    const org = await createOrg(app.context);
    const ids = await insertWorks(app.context, org, 25, { ageSeconds: (i) => i });
    const { token } = await createKey(app.context, org, ['works:read']);
    const reply = await list(token);
    expect(reply.status).to.equal(200);
    expect(reply.body.works).to.have.length(20);
    expect(reply.body.total_count).to.equal(25);
    expect(reply.body.page_info).to.deep.include({ has_next_page: true, has_previous_page: false });
    const row = await app.context.db('works').where({ id: ids[0] }).first();
    expect(reply.body.works[0]).to.deep.equal({
      id: row.id,
      ats_id: Number(row.ats_id),
      owner: row.owner,
      latest_version: 1,
      latest_commitment: row.latest_commitment,
      created_at: row.created_at.toISOString(),
      latest_version_at: row.latest_version_at.toISOString(),
      title: row.title,
      asset_filename: row.asset_filename,
      has_files: true,
    });
    const last = await list(token, `?after=${encodeURIComponent(reply.body.page_info.end_cursor)}`);
    expect(last.body.works).to.have.length(5);
    expect(last.body.page_info).to.deep.include({ has_next_page: false, has_previous_page: true });
    expect(last.body.works.at(-1).id).to.equal(ids[24]);
  });

  it('filters by external_user_ref and network; total_count follows the filters; a ref with no works is 404', async () => {
    const org = await createOrg(app.context);
    const alice = await insertWorks(app.context, org, 5, { externalUserRef: 'alice' });
    const aliceMainnet = await insertWorks(app.context, org, 2, { externalUserRef: 'alice', network: 'mainnet' });
    const bob = await insertWorks(app.context, org, 3, { externalUserRef: 'bob' });
    await insertWorks(app.context, org, 4);
    const { token } = await createKey(app.context, org, ['works:read']);
    const other = await createOrg(app.context);
    await insertWorks(app.context, other, 3, { externalUserRef: 'alice' });

    const all = await list(token, '?first=100');
    expect(all.body.total_count).to.equal(14);
    const ofAlice = await list(token, '?external_user_ref=alice&first=100');
    expect(ofAlice.body.total_count).to.equal(7);
    expect(ofAlice.body.works.map((w: { id: string }) => w.id)).to.have.members([...alice, ...aliceMainnet]);
    const aliceOnTestnet = await list(token, '?external_user_ref=alice&network=testnet');
    expect(aliceOnTestnet.body.works.map((w: { id: string }) => w.id)).to.have.members(alice);
    expect(aliceOnTestnet.body.total_count).to.equal(5);
    expect((await list(token, '?network=mainnet')).body.total_count).to.equal(2);
    expect((await list(token, '?network=testnet')).body.total_count).to.equal(12);
    const ofBob = await list(token, '?external_user_ref=bob&first=2');
    expect(ofBob.body.total_count).to.equal(3);
    expect(ofBob.body.works).to.have.length(2);
    const bobRest = await list(token, `?external_user_ref=bob&first=2&after=${encodeURIComponent(ofBob.body.page_info.end_cursor)}`);
    expect([...ofBob.body.works, ...bobRest.body.works].map((w: { id: string }) => w.id)).to.have.members(bob);

    expectError(await list(token, '?external_user_ref=nobody'), 404, 'common.not_found');
    expectError(await list(token, '?external_user_ref=bob&network=mainnet'), 404, 'common.not_found');
    // without a ref, an empty listing is a page, not an error
    const empty = await list((await createKey(app.context, await createOrg(app.context), ['works:read'])).token);
    expect(empty.status).to.equal(200);
    expect(empty.body).to.deep.equal({
      works: [],
      page_info: { has_next_page: false, has_previous_page: false, start_cursor: null, end_cursor: null },
      total_count: 0,
    });
  });

  it('a session token lists only its own ref’s works, whatever ref the query names', async () => {
    const org = await createOrg(app.context);
    const carol = await insertWorks(app.context, org, 3, { externalUserRef: 'carol' });
    await insertWorks(app.context, org, 4, { externalUserRef: 'dave' });
    await insertWorks(app.context, org, 2);
    const key = await createKey(app.context, org, ['works:read']);
    const session = async (ref: string) =>
      (await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: ref } })).body.session_token as string;
    const carolToken = await session('carol');
    for (const query of ['', '?external_user_ref=dave', '?external_user_ref=carol']) {
      const reply = await list(carolToken, query);
      expect(reply.status).to.equal(200);
      expect(reply.body.total_count).to.equal(3);
      expect(reply.body.works.map((w: { id: string }) => w.id)).to.have.members(carol);
    }
    expectError(await list(await session('erin')), 404, 'common.not_found');
  });

  it('needs works:read, and refuses a malformed query with 400', async () => {
    const org = await createOrg(app.context);
    await insertWorks(app.context, org, 1);
    const writer = await createKey(app.context, org, ['works:register', 'works:update']);
    expectError(await list(writer.token), 403, 'auth.insufficient_scope');
    expectError(await call(app.url, 'GET', '/v1/works'), 401, 'auth.unauthorized');
    const { token } = await createKey(app.context, org, ['works:read']);
    for (const query of [
      '?first=0',
      '?first=101',
      '?first=abc',
      '?first=2.5',
      '?first=1&first=2',
      '?network=moon',
      '?after=not-a-cursor',
      `?after=${Buffer.from('w1|yesterday|x').toString('base64url')}`,
      '?external_user_ref=',
    ]) {
      expectError(await list(token, query), 400, 'common.bad_request');
    }
    expect((await list(token, '?first=100&unknown=ignored')).status).to.equal(200);
  });

  it("walks an index backwards for every listing shape: the listing's own statement sorts no works but its page's", async () => {
    const org = await createOrg(app.context);
    // with the planner told to avoid scans and sorts that an index could spare, a missing index shows as a Sort
    const plan = (statement: Knex.Raw): Promise<string[]> =>
      app.context.db.transaction(async (trx) => {
        await trx.raw('SET LOCAL enable_seqscan = off');
        await trx.raw('SET LOCAL enable_sort = off');
        const { sql, bindings } = statement.toSQL();
        return (await trx.raw(`EXPLAIN ${sql}`, bindings as readonly Knex.RawBinding[])).rows.map(
          (r: Record<string, string>) => r['QUERY PLAN'],
        );
      });
    const cursor = { createdAt: new Date().toISOString(), id: randomUUID() };
    for (const filter of [{}, { network: 'testnet' as const }, { externalUserRef: 'x' }])
      for (const after of [undefined, cursor]) {
        const shape = await plan(pageStatement(app.context.db, { organizationId: org, ...filter }, 20, after));
        const what = `${JSON.stringify(filter)}${after ? ', after a cursor' : ''}`;
        const index =
          'network' in filter
            ? 'works_organization_id_network_created_at_id_index'
            : 'externalUserRef' in filter
              ? 'works_organization_id_external_user_ref_created_at_id_index'
              : 'works_organization_created_index';
        expect(shape.join('\n'), what).to.include(`Index Scan Backward using ${index} `);
        // the one sort is the statement's last step, over the page's rows (at most first + 1)
        expect(shape[0], what).to.match(/^Sort\b/);
        expect(
          shape.slice(1).filter((line) => /->\s+(Incremental )?Sort\b/.test(line)),
          what,
        ).to.deep.equal([]);
      }
  });
});
