import { createLogger } from '../shared/logger';
import { openResources, type Resources } from '../shared/resources';
import { listWorks } from '../shared/works/service';
import { encodeCursor } from '../shared/works/cursor';
import type { Principal } from '../shared/api-keys/types';
import { createOrg, createKey } from '../test/helpers/factories';
import { benchMain, say } from './lib/main';
import { pick } from './lib/options';
import { BenchReport } from './lib/report';
import { startBenchServices } from './lib/services';
import { startWebProcess } from './lib/processes';
import { msSince, percentile, repeat } from './lib/stats';
import { cpuMs, cpuSince, postgresBackends } from './lib/cpu';

/**
 * The listing under volume: N works over 100 organizations, inserted in bulk (one INSERT … SELECT over
 * generate_series), the largest organization holding a tenth of them, each work with one of 1,000 end-user
 * refs and 1 in 10 on mainnet, except that half of the largest organization's works (its even ones) share one
 * ref, CATALOG: a partner that keeps a catalog under one end-user ref. Sequential `GET /v1/works?first=20` of that
 * organization through a web process: the first page, the page after its 10,000 newest works (a keyset cursor),
 * one end-user's first page and the catalog's first page; p99 of each per run, beside GET /healthz of the same
 * server and the service call without HTTP.
 */
const ORGANIZATIONS = 100;
const REFS = 1000;
const CATALOG = 'catalog';

benchMain(async (options) => {
  const total = pick(options, options.size, 1_000_000, 2_000);
  const runs = pick(options, options.runs, 3, 1);
  const requests = options.smoke ? 30 : 300;
  const large = Math.floor(total / 10);
  const depth = Math.min(10_000, Math.floor(large / 2));
  const catalogWorks = Math.floor(large / 2);
  const report = new BenchReport('listing', options.smoke, {
    works: total,
    organizations: ORGANIZATIONS,
    largest_organization_works: large,
    refs_per_organization: REFS,
    catalog_ref_works: catalogWorks,
    cursor_depth: depth,
    requests_per_query_per_run: requests,
    runs,
    page: 20,
  });
  say(`listing: ${total} works over ${ORGANIZATIONS} organizations (the largest ${large}), ${runs} runs of ${requests} requests per query`);
  const services = await startBenchServices('listing', { blocks: 'instant' });
  Object.assign(report.versions, services.versions);
  const context = openResources(services.config, createLogger('warn'), 'dev');
  const web = await startWebProcess(services.env, options);
  try {
    const orgs: string[] = [];
    for (let i = 0; i < ORGANIZATIONS; i++) orgs.push(await createOrg(context, 0));
    const started = process.hrtime.bigint();
    await insertWorks(context, orgs, total, large);
    const insertSeconds = msSince(started) / 1000;
    say(`  inserted ${total} works in ${insertSeconds.toFixed(1)} s (VACUUM ANALYZE included)`);
    report.parameters.insert_seconds = Math.round(insertSeconds * 10) / 10;

    const organizationId = orgs[0]!;
    const key = await createKey(context, organizationId, ['works:read']);
    const [row] = (
      await context.db.raw(
        `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at, id FROM works
         WHERE organization_id = ? ORDER BY created_at DESC, id DESC OFFSET ? LIMIT 1`,
        [organizationId, depth - 1],
      )
    ).rows;
    const after = encodeCursor({ createdAt: row.created_at, id: row.id });
    const queries = {
      first: { path: '/v1/works?first=20', input: { first: 20 } },
      deep: { path: `/v1/works?first=20&after=${after}`, input: { first: 20, after } },
      ref: { path: '/v1/works?first=20&external_user_ref=user-7', input: { first: 20, external_user_ref: 'user-7' } },
      catalog: { path: `/v1/works?first=20&external_user_ref=${CATALOG}`, input: { first: 20, external_user_ref: CATALOG } },
    };
    const principal: Principal = { kind: 'api_key', apiKeyId: key.id, organizationId, scopes: ['works:read'] };
    const get = async (path: string, token?: string) => {
      const t = process.hrtime.bigint();
      const res = await fetch(web.url + path, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
      const body = (await res.json()) as { works?: unknown[] };
      if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
      if (token && !body.works?.length) throw new Error(`${path}: no works`);
      return msSince(t);
    };
    for (let i = 0; i < 20; i++) for (const q of Object.values(queries)) await get(q.path, key.token); // warm-up

    type Name = keyof typeof queries | 'healthz';
    const samples = await repeat(runs, async (run) => {
      const http: Record<Name, number[]> = { first: [], deep: [], ref: [], catalog: [], healthz: [] };
      const direct: Record<keyof typeof queries, number[]> = { first: [], deep: [], ref: [], catalog: [] };
      for (let i = 0; i < requests; i++) {
        for (const [name, q] of Object.entries(queries) as [keyof typeof queries, (typeof queries)['first']][]) {
          http[name].push(await get(q.path, key.token));
          const t = process.hrtime.bigint();
          await listWorks(context.db, principal, q.input);
          direct[name].push(msSince(t));
        }
        http.healthz.push(await get('/healthz'));
      }
      // CPU per request, each query alone (no service calls from this process meanwhile): the web and PostgreSQL
      const cpu = {} as Record<keyof typeof queries, { web: number; postgres: number }>;
      for (const [name, q] of Object.entries(queries) as [keyof typeof queries, (typeof queries)['first']][]) {
        const backends = await postgresBackends(context);
        const before = cpuMs([web.pid, ...backends]);
        for (let i = 0; i < requests; i++) await get(q.path, key.token);
        cpu[name] = { web: cpuSince(before, [web.pid]) / requests, postgres: cpuSince(before, backends) / requests };
      }
      const p99 = (xs: number[]) => percentile(xs, 99);
      const out = {
        cpu,
        first: p99(http.first),
        deep: p99(http.deep),
        ref: p99(http.ref),
        catalog: p99(http.catalog),
        healthz: p99(http.healthz),
        directFirst: p99(direct.first),
        directDeep: p99(direct.deep),
        directRef: p99(direct.ref),
        directCatalog: p99(direct.catalog),
      };
      const cpuLine = Object.entries(cpu).map(([name, c]) => `${name} ${c.web.toFixed(2)} / ${c.postgres.toFixed(2)}`);
      say(
        `  run ${run + 1}: p99 first ${out.first.toFixed(1)} ms, after ${depth} ${out.deep.toFixed(1)} ms, ref ${out.ref.toFixed(1)} ms, catalog ${out.catalog.toFixed(1)} ms, /healthz ${out.healthz.toFixed(1)} ms`,
      );
      say(`    CPU per request (ms), web / PostgreSQL: ${cpuLine.join(', ')}`);
      return out;
    });
    const healthz = { label: 'GET /healthz p99', runs: samples.map((s) => s.healthz) };
    const target = { text: '< 20 ms', met: (v: number) => v < 20 };
    report.add({ id: 'first_page_p99_ms', label: 'first page p99', unit: 'ms', runs: samples.map((s) => s.first), floor: healthz, target });
    report.add({
      id: 'deep_page_p99_ms',
      label: `page after ${depth.toLocaleString('en-US')} works p99`,
      unit: 'ms',
      runs: samples.map((s) => s.deep),
      floor: healthz,
      target,
    });
    report.add({
      id: 'ref_page_p99_ms',
      label: 'ref-filtered page p99',
      unit: 'ms',
      runs: samples.map((s) => s.ref),
      floor: healthz,
      target,
    });
    report.add({
      id: 'catalog_page_p99_ms',
      label: `page of a ref holding ${catalogWorks.toLocaleString('en-US')} works p99`,
      unit: 'ms',
      runs: samples.map((s) => s.catalog),
      floor: healthz,
      target,
    });
    report.add({
      id: 'first_page_service_p99_ms',
      label: 'first page p99, service call only',
      unit: 'ms',
      runs: samples.map((s) => s.directFirst),
    });
    report.add({
      id: 'deep_page_service_p99_ms',
      label: 'deep page p99, service call only',
      unit: 'ms',
      runs: samples.map((s) => s.directDeep),
    });
    report.add({
      id: 'ref_page_service_p99_ms',
      label: 'ref page p99, service call only',
      unit: 'ms',
      runs: samples.map((s) => s.directRef),
    });
    report.add({
      id: 'catalog_page_service_p99_ms',
      label: 'catalog page p99, service call only',
      unit: 'ms',
      runs: samples.map((s) => s.directCatalog),
    });
    for (const name of ['first', 'deep', 'ref', 'catalog'] as const) {
      for (const part of ['web', 'postgres'] as const) {
        report.add({
          id: `${name}_page_cpu_ms_${part}`,
          label: `${name} page: CPU per request, ${part === 'web' ? 'the web process' : 'PostgreSQL'}`,
          unit: 'ms',
          runs: samples.map((s) => s.cpu[name][part]),
        });
      }
    }
    report.note(
      `every listing answers total_count too, read from counters the triggers on works keep (the bulk insert included), not counted: work_counts for the unfiltered pages (the largest organization's ${large.toLocaleString('en-US')} works), work_ref_counts for the ref pages (the catalog's ${catalogWorks.toLocaleString('en-US')})`,
    );
    report.write(options.outDir);
  } finally {
    await web.stop();
    await context.close();
    await services.stop();
  }
});

/** The works in one statement: work g belongs to the largest organization for g ≤ large, else to the others in turn. */
async function insertWorks(app: Resources, orgs: string[], total: number, large: number): Promise<void> {
  const { db } = app;
  await db.raw(
    `INSERT INTO works (id, organization_id, network, ats_id, owner, title, asset_filename, latest_version, latest_commitment, external_user_ref, has_files, created_at, latest_version_at)
     SELECT gen_random_uuid(),
       CASE WHEN g <= ? THEN (?::uuid[])[1] ELSE (?::uuid[])[2 + (g % ?)] END,
       CASE WHEN g % 10 = 0 THEN 'mainnet' ELSE 'testnet' END,
       g, '5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY', 'Work ' || g, 'work-' || g || '.wav', 1,
       '0x' || md5(g::text) || md5((g + 1)::text), CASE WHEN g <= ? AND g % 2 = 0 THEN ? ELSE 'user-' || (g % ?) END, true,
       now() - make_interval(secs => (? - g) * 0.25), now()
     FROM generate_series(1, ?) AS g`,
    [large, orgs, orgs, orgs.length - 1, large, CATALOG, REFS, total, total],
  );
  await db('ats_counters').update({ next_id: total + 1 });
  // the listing's total_count reads the counts the insert's triggers kept: they must add up (every work has a ref)
  for (const table of ['work_counts', 'work_ref_counts']) {
    const [counted] = await db(table).sum<{ works: string }[]>('works as works');
    if (Number(counted?.works) !== total) throw new Error(`${table} holds ${counted?.works} works, not ${total}`);
  }
  await db.raw('VACUUM ANALYZE works');
}
