import os from 'node:os';
import path from 'node:path';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { expect } from 'chai';
import Ajv from 'ajv';
import { parse as parseYaml } from 'yaml';
import { startApp, call, type TestApp } from '../helpers/app';
import { createOrg } from '../helpers/factories';
import { operatorToken } from '../helpers/identity';
import { exposedFamilies, metricNames, seriesNames, type MetricFamily } from '../helpers/promql';
import { ensurePromtool, run } from '../helpers/promtool';
import { dashboardSchema } from '../helpers/grafana-schema';
import { BOARD_PATH } from '../../web/routes/queues-board/board';
import { EventMetrics } from '../../shared/metrics/events';

/**
 * docs/operations: the Grafana dashboard, the Prometheus alerting rules and their runbook. promtool (Debian's
 * prometheus package, installed here where it can be, else these checks are skipped saying why) checks the
 * rules and runs their unit tests (alerts.test.yml: each alert firing on its series, silent on healthy ones);
 * the dashboard is checked against the dashboard model's schema; every metric a query or a rule names must be
 * one the code exposes, and every works_api_ metric must be on the dashboard. Each check is first shown to
 * catch what it looks for.
 */
const DIR = path.resolve(__dirname, '../../docs/operations');
const ALERTS = path.join(DIR, 'alerts.yml');
const ALERT_TESTS = path.join(DIR, 'alerts.test.yml');
const read = (file: string) => readFileSync(path.join(DIR, file), 'utf8');

/** What a worker process counts and serves on its METRICS_PORT (jobs/metrics-server.ts adds the process metrics). */
async function workerFamilies(): Promise<MetricFamily[]> {
  const metrics = await new EventMetrics().registry.getMetricsAsJSON();
  return metrics.map(({ name, type }) => ({ name, type: String(type) as MetricFamily['type'] }));
}

/** What a web process serves at /metrics, read from a real one. */
async function webFamilies(app: TestApp): Promise<MetricFamily[]> {
  const token = await operatorToken({ organizationId: await createOrg(app.context) });
  const reply = await call(app.url, 'GET', '/metrics', { token });
  expect(reply.status, reply.text).to.equal(200);
  return exposedFamilies(reply.text);
}

interface Query {
  readonly where: string;
  readonly expr: string;
}

interface Rule {
  readonly alert: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

const rulesOf = (yamlText: string): Rule[] => (parseYaml(yamlText) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

function panelsOf(dashboard: any): any[] {
  return (dashboard.panels as any[]).flatMap((p) => [p, ...((p.panels as any[] | undefined) ?? [])]);
}

function dashboardQueries(dashboard: any): Query[] {
  const fromPanels = panelsOf(dashboard).flatMap((p) =>
    ((p.targets as any[] | undefined) ?? []).map((t) => ({ where: `panel "${p.title}" query ${t.refId}`, expr: String(t.expr) })),
  );
  const fromVariables = (dashboard.templating.list as any[])
    .filter((v) => v.type === 'query')
    .map((v) => ({ where: `variable ${v.name}`, expr: String(typeof v.query === 'string' ? v.query : v.query.query) }));
  return [...fromPanels, ...fromVariables];
}

const ruleQueries = (rules: readonly Rule[]): Query[] => rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr }));

/** Each query's names that are no series of the given families. */
function unknownNames(queries: readonly Query[], families: readonly MetricFamily[]): string[] {
  const known = seriesNames(families);
  return queries.flatMap(({ where, expr }) =>
    metricNames(expr)
      .filter((n) => !known.has(n))
      .map((n) => `${where}: ${n}`),
  );
}

/** The works_api_ families none of the queries reads. */
function unused(queries: readonly Query[], families: readonly MetricFamily[]): string[] {
  const read = new Set(queries.flatMap((q) => metricNames(q.expr)));
  return families
    .filter((f) => f.name.startsWith('works_api_'))
    .filter((f) => ![...seriesNames([f])].some((s) => read.has(s)))
    .map((f) => f.name);
}

/** GitHub's anchor for a Markdown heading. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

const validateDashboard = new Ajv({ allErrors: true, strict: true }).compile<any>(dashboardSchema);

/** The schema's findings, then overlapping or out-of-grid panels, repeated ids and refIds, missing variables. */
function dashboardProblems(dashboard: any): string[] {
  if (!validateDashboard(dashboard))
    return validateDashboard.errors!.map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`);
  const problems: string[] = [];
  const panels = panelsOf(dashboard);
  const ids = panels.map((p) => p.id as number);
  if (new Set(ids).size !== ids.length) problems.push(`panel ids repeat: ${ids.join(',')}`);
  panels.forEach((a, i) => {
    if (a.gridPos.x + a.gridPos.w > 24) problems.push(`"${a.title}" runs past the grid's 24 columns`);
    for (const b of panels.slice(i + 1)) {
      const [p, q] = [a.gridPos, b.gridPos];
      if (p.x < q.x + q.w && q.x < p.x + p.w && p.y < q.y + q.h && q.y < p.y + p.h) problems.push(`"${a.title}" overlaps "${b.title}"`);
    }
    const refIds = ((a.targets as any[] | undefined) ?? []).map((t) => t.refId as string);
    if (new Set(refIds).size !== refIds.length) problems.push(`"${a.title}" repeats a refId`);
  });
  const variables = new Map((dashboard.templating.list as any[]).map((v) => [v.name as string, v]));
  if (variables.get('datasource')?.type !== 'datasource' || variables.get('datasource')?.query !== 'prometheus')
    problems.push('no datasource variable of Prometheus data sources');
  if (variables.get('network')?.type !== 'query') problems.push('no network variable');
  if (!dashboardQueries(dashboard).some((q) => q.expr.includes('$network'))) problems.push('no query uses $network');
  return problems;
}

describe('operations: dashboard, alert rules and runbook', () => {
  describe('metric names read from PromQL, on fixtures', () => {
    it('keeps metric names and drops functions, labels, strings, ranges, variables, numbers and keywords', () => {
      expect(
        metricNames('histogram_quantile(0.95, sum by (le, route) (rate(a_seconds_bucket{status=~"5..", x="b{c} d"}[$__rate_interval])))'),
      ).to.deep.equal(['a_seconds_bucket']);
      expect(
        metricNames(
          'max by (network) (bal{network=~"$network"}) < 86400 * sum by (network) (rate(fees_total[1h])) or bal offset 5m > bool 1e3',
        ),
      ).to.deep.equal(['bal', 'fees_total']);
      expect(metricNames('sum(x) without (instance) / on (network) group_left (foo) y unless absent(z) # and w')).to.deep.equal([
        'x',
        'y',
        'z',
      ]);
      expect(metricNames('topk(5, max_over_time(deriv(g[10m:1m])[1h:]))+0x1F')).to.deep.equal(['g']);
      expect(metricNames('label_values(works_api_chain_connected, network)')).to.deep.equal(['works_api_chain_connected']);
    });

    it('knows a histogram by its _bucket, _sum and _count series and finds a name no family has', () => {
      const families: MetricFamily[] = [
        { name: 'h_seconds', type: 'histogram' },
        { name: 'g', type: 'gauge' },
      ];
      expect([...seriesNames(families)]).to.have.members(['h_seconds_bucket', 'h_seconds_sum', 'h_seconds_count', 'g']);
      const queries = [{ where: 'q', expr: 'rate(h_seconds_sum[5m]) / rate(h_seconds_count[5m]) + h_seconds + g_count + g' }];
      expect(unknownNames(queries, families)).to.deep.equal(['q: h_seconds', 'q: g_count']);
      expect(unused([{ where: 'q', expr: 'g' }], [{ name: 'works_api_x', type: 'counter' }])).to.deep.equal(['works_api_x']);
    });
  });

  describe('the alert rules, with promtool', () => {
    let promtool = 'promtool';
    before(function () {
      this.timeout(600_000);
      const found = ensurePromtool();
      if (!found.ok) {
        process.stdout.write(`      skipped: ${found.reason}\n`);
        this.skip();
      }
      promtool = found.promtool;
    });

    it('promtool check rules accepts docs/operations/alerts.yml, and refuses a broken expression', function () {
      const checked = run(promtool, ['check', 'rules', ALERTS]);
      expect(checked.status, checked.output).to.equal(0);
      expect(checked.output).to.match(/SUCCESS: \d+ rules found/);
      const dir = mkdtempSync(path.join(os.tmpdir(), 'works-alerts-'));
      try {
        const broken = path.join(dir, 'alerts.yml');
        writeFileSync(
          broken,
          readFileSync(ALERTS, 'utf8').replace(
            'max by (network) (works_api_chain_connected) == 0',
            'max by (network (works_api_chain_connected) == 0',
          ),
        );
        const refused = run(promtool, ['check', 'rules', broken]);
        expect(refused.status, refused.output).to.not.equal(0);
        expect(refused.output).to.include('parse error');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('promtool test rules: each alert fires on its series and stays silent on the healthy ones; a wrong rule fails them', function () {
      const tested = run(promtool, ['test', 'rules', ALERT_TESTS]);
      expect(tested.status, tested.output).to.equal(0);
      expect(tested.output).to.include('SUCCESS');
      // every alert has a test that expects it to fire
      const tests = (
        parseYaml(readFileSync(ALERT_TESTS, 'utf8')) as { tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[] }
      ).tests;
      const firing = new Set(tests.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)));
      expect([...firing]).to.have.members(rulesOf(read('alerts.yml')).map((r) => r.alert));
      // the same tests against rules with the oldest transaction's threshold at an hour instead of 10 minutes
      const dir = mkdtempSync(path.join(os.tmpdir(), 'works-alerts-'));
      try {
        writeFileSync(
          path.join(dir, 'alerts.yml'),
          readFileSync(ALERTS, 'utf8').replace('oldest_open_age_seconds) > 600', 'oldest_open_age_seconds) > 3600'),
        );
        writeFileSync(path.join(dir, 'alerts.test.yml'), readFileSync(ALERT_TESTS, 'utf8'));
        const failed = run(promtool, ['test', 'rules', path.join(dir, 'alerts.test.yml')]);
        expect(failed.status, failed.output).to.not.equal(0);
        expect(failed.output).to.include('alertname: TransactionOpenTooLong');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('the rules and their runbook', () => {
    it('every rule waits (for:), has a severity, a summary, a description and a runbook_url to its own section', () => {
      const rules = rulesOf(read('alerts.yml'));
      expect(rules.map((r) => r.alert)).to.include.members([
        'RelayerBalanceLow',
        'TransactionOpenTooLong',
        'WebhookDeadLettersGrowing',
        'ChainDisconnected',
        'QueueWaitRising',
      ]);
      const runbook = read('runbook.md');
      const sections = new Set([...runbook.matchAll(/^#{2,3} (.+)$/gm)].map((m) => anchor(m[1]!)));
      for (const rule of rules) {
        expect(rule.for, rule.alert).to.match(/^\d+[smh]$/);
        expect(rule.labels?.severity, rule.alert).to.be.oneOf(['critical', 'warning']);
        expect(rule.annotations?.summary, rule.alert).to.be.a('string').that.is.not.empty;
        expect(rule.annotations?.description, rule.alert).to.be.a('string').that.is.not.empty;
        expect(rule.annotations?.runbook_url, rule.alert).to.equal(`docs/operations/runbook.md#${rule.alert.toLowerCase()}`);
        expect(sections, `runbook section for ${rule.alert}`).to.include(rule.alert.toLowerCase());
      }
    });

    it('what the runbook writes in italics is a panel of the dashboard, an alert, a Bull Board tab or the dashboard', () => {
      const runbook = read('runbook.md');
      const dashboard = JSON.parse(read('dashboard.json'));
      const known = new Set([
        ...panelsOf(dashboard).map((p) => p.title as string),
        ...rulesOf(read('alerts.yml')).map((r) => r.alert),
        ...['Waiting', 'Active', 'Failed'],
        dashboard.title as string,
      ]);
      const italics = [...runbook.matchAll(/(?<![*\w])\*([^*]+)\*(?![*\w])/g)].map((m) => m[1]!.replace(/\s+/g, ' '));
      expect(italics.length).to.be.greaterThan(10);
      expect(
        italics.filter((t) => !known.has(t)),
        'italics the dashboard, the rules and Bull Board lack',
      ).to.deep.equal([]);
      expect(runbook, 'Bull Board at its path').to.include(`Bull Board at \`${BOARD_PATH}\``);
    });
  });

  describe('the dashboard', () => {
    it('is a Grafana dashboard: the dashboard model, panels on the grid, a datasource and a network variable', () => {
      expect(dashboardProblems(JSON.parse(read('dashboard.json')))).to.deep.equal([]);
    });

    it('the checks refuse a misspelt field, a query without refId, overlapping panels and a fixed data source', () => {
      const broken = (mutate: (d: any) => void) => {
        const dashboard = JSON.parse(read('dashboard.json'));
        mutate(dashboard);
        return dashboardProblems(dashboard).join('\n');
      };
      expect(broken((d) => ((d.schemaVerison = d.schemaVersion), delete d.schemaVersion))).to.include('schemaVersion');
      expect(broken((d) => delete d.panels[1].targets[0].refId)).to.include('refId');
      expect(broken((d) => (d.panels[2].gridPos = { ...d.panels[1].gridPos }))).to.include('overlaps');
      expect(broken((d) => (d.panels[1].datasource = { type: 'prometheus', uid: 'P1809F7CD0C75ACF3' }))).to.include('datasource');
    });
  });

  describe('metric names against the code', () => {
    let app: TestApp;
    let families: MetricFamily[];
    before(async () => {
      app = await startApp();
      families = [...(await webFamilies(app)), ...(await workerFamilies())];
    });
    after(() => app?.close());

    it('the web exposes the Node.js process metrics the dashboard reads', () => {
      const names = families.map((f) => f.name);
      expect(names).to.include.members(['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_p99_seconds']);
    });

    it('every metric a dashboard query names is one the code exposes, and every works_api_ metric is on the dashboard', () => {
      const dashboard = JSON.parse(read('dashboard.json'));
      expect(unknownNames(dashboardQueries(dashboard), families)).to.deep.equal([]);
      expect(unused(dashboardQueries(dashboard), families), 'metrics on no panel').to.deep.equal([]);
      const misspelt = JSON.parse(read('dashboard.json').replace('works_api_relayer_free_balance', 'works_api_relayer_free_balanse'));
      expect(unknownNames(dashboardQueries(misspelt), families).join('\n')).to.include('works_api_relayer_free_balanse');
    });

    it('every metric an alert rule names is one the code exposes', () => {
      expect(unknownNames(ruleQueries(rulesOf(read('alerts.yml'))), families)).to.deep.equal([]);
      const misspelt = rulesOf(read('alerts.yml').replace('works_api_chain_connected', 'works_api_chain_conected'));
      expect(unknownNames(ruleQueries(misspelt), families)).to.deep.equal(['alert ChainDisconnected: works_api_chain_conected']);
    });
  });
});
