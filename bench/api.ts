import autocannon from 'autocannon';
import { createLogger } from '../shared/logger';
import { openResources } from '../shared/resources';
import { createOrg, createKey } from '../test/helpers/factories';
import { initBody } from '../test/helpers/registration';
import { benchMain, say } from './lib/main';
import { pick } from './lib/options';
import { BenchReport } from './lib/report';
import { startBenchServices } from './lib/services';
import { startWebProcess } from './lib/processes';
import { repeat } from './lib/stats';
import { cpuMs, cpuSince, postgresBackends, redisCpuMs } from './lib/cpu';

/**
 * The web under load: autocannon against one web process (its own, logging at info as in production),
 * `POST /v1/works/init` (validate, one Redis script checking the key's record and the organization's status,
 * taking a token of its bucket and storing the upload session; presign the PUT) beside `GET /healthz` of the
 * same server, alternately. Each load also reports the CPU it cost per request: the web's, the client's
 * (autocannon, in this process) and Redis's, since all of them share this machine's cores.
 */
benchMain(async (options) => {
  const seconds = pick(options, options.size, 10, 1);
  const connections = pick(options, options.connections, 64, 4);
  const runs = pick(options, options.runs, 3, 1);
  // The organization's token bucket (20/s by default) would answer 429 to nearly all of this load; it still
  // runs on every request, with a rate no bench reaches.
  const env = { LOG_LEVEL: 'info', RATE_LIMIT_PER_SECOND: '100000', RATE_LIMIT_BURST: '1000000' };
  const report = new BenchReport('api', options.smoke, { seconds, connections, runs, env });
  say(`api: ${connections} connections, ${seconds} s, ${runs} runs`);
  const services = await startBenchServices('api', { blocks: 'instant', env });
  Object.assign(report.versions, services.versions);
  const context = openResources(services.config, createLogger('warn'), 'dev');
  const web = await startWebProcess(services.env, options);
  try {
    const key = await createKey(context, await createOrg(context, 1000));
    const init = {
      method: 'POST' as const,
      path: '/v1/works/init',
      headers: { Authorization: `Bearer ${key.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(initBody()),
    };
    const healthz = { method: 'GET' as const, path: '/healthz', headers: {} as Record<string, string> };
    const load = async (request: typeof init | typeof healthz, duration: number) => {
      const { path, ...rest } = request;
      const backends = await postgresBackends(context);
      const [webBefore, pgBefore, redisBefore, clientBefore] = [
        cpuMs([web.pid]),
        cpuMs(backends),
        await redisCpuMs(context),
        process.cpuUsage(),
      ];
      const result = await autocannon({ url: web.url + path, connections, duration, ...rest });
      const client = process.cpuUsage(clientBefore);
      const perRequest = (ms: number) => (1000 * ms) / result.requests.total;
      const cpu = {
        web: perRequest(cpuSince(webBefore, [web.pid])),
        client: perRequest((client.user + client.system) / 1000),
        redis: perRequest((await redisCpuMs(context)) - redisBefore),
        postgres: perRequest(cpuSince(pgBefore, backends)),
      };
      const failed = result.non2xx + result.errors + result.timeouts;
      if (failed > 0) {
        const sample = await fetch(web.url + request.path, request).then(async (r) => `${r.status} ${await r.text()}`);
        throw new Error(
          `${request.path}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts of ${result.requests.total}; one more answered ${sample.slice(0, 300)}`,
        );
      }
      return { rps: result.requests.average, p99: result.latency.p99, p50: result.latency.p50, total: result.requests.total, cpu };
    };
    await load(init, 1); // warm-up: JIT, connection pools
    await load(healthz, 1);
    const samples = await repeat(runs, async (run) => {
      const i = await load(init, seconds);
      const h = await load(healthz, seconds);
      const us = (cpu: typeof i.cpu) =>
        `web ${cpu.web.toFixed(0)}, client ${cpu.client.toFixed(0)}, Redis ${cpu.redis.toFixed(0)}, PostgreSQL ${cpu.postgres.toFixed(0)}`;
      say(`  run ${run + 1}: init ${Math.round(i.rps)} req/s p99 ${i.p99} ms, healthz ${Math.round(h.rps)} req/s p99 ${h.p99} ms`);
      say(`    CPU per request (µs): init ${us(i.cpu)}; healthz ${us(h.cpu)}`);
      return { i, h };
    });
    report.add({
      id: 'init_rps',
      label: 'POST /v1/works/init throughput',
      unit: 'req/s',
      runs: samples.map((s) => s.i.rps),
      floor: { label: 'GET /healthz', runs: samples.map((s) => s.h.rps) },
      target: { text: '≥ 40% of /healthz', met: (v, floor) => v >= 0.4 * floor },
    });
    report.add({
      id: 'init_share',
      label: 'init / healthz throughput',
      unit: '%',
      runs: samples.map((s) => (100 * s.i.rps) / s.h.rps),
      target: { text: '≥ 40%', met: (v) => v >= 40 },
    });
    report.add({
      id: 'init_p99_ms',
      label: 'POST /v1/works/init p99 latency',
      unit: 'ms',
      runs: samples.map((s) => s.i.p99),
      floor: { label: 'GET /healthz p99', runs: samples.map((s) => s.h.p99) },
      target: { text: '≤ 3 × healthz p99', met: (v, floor) => v <= 3 * floor },
    });
    for (const [part, label] of [
      ['web', 'the web process'],
      ['client', 'the client (autocannon)'],
      ['redis', 'Redis'],
      ['postgres', "PostgreSQL (the bench database's backends)"],
    ] as const) {
      report.add({
        id: `init_cpu_us_${part}`,
        label: `init: CPU per request, ${label}`,
        unit: 'µs',
        runs: samples.map((s) => s.i.cpu[part]),
        floor: { label: `healthz: the same`, runs: samples.map((s) => s.h.cpu[part]) },
      });
    }
    report.add({
      id: 'init_p50_ms',
      label: 'POST /v1/works/init p50 latency',
      unit: 'ms',
      runs: samples.map((s) => s.i.p50),
      floor: { label: 'GET /healthz p50', runs: samples.map((s) => s.h.p50) },
    });
    report.note('autocannon runs in the bench process on the same 2 cores as the web process, PostgreSQL and Redis.');
    report.write(options.outDir);
  } finally {
    await web.stop();
    await context.close();
    await services.stop();
  }
});
