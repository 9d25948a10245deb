import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { expect } from 'chai';

/**
 * Every benchmark at a tiny size (`npm run bench -- --smoke`: hash 1 MB, api 1 s with 4 connections, pipeline
 * 5 registrations, webhooks 50, listing 2,000 works, sockets 50, chain-alone 5 calls; chain-limits has no size), each against dependencies of its own, so none
 * of them rots: each must finish, print its table and write a results JSON with numbers (into a temporary
 * directory, never bench/results).
 */
describe('benchmarks (smoke)', function () {
  this.timeout(600_000);
  const root = path.resolve(__dirname, '../..');
  const benches = readdirSync(path.join(root, 'bench'))
    .filter((f) => f.endsWith('.ts') && f !== 'run.ts')
    .map((f) => f.slice(0, -3));
  let out: string;
  let output = '';
  let code: number | null = null;

  before(async () => {
    out = mkdtempSync(path.join(os.tmpdir(), 'works-bench-smoke-'));
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--smoke', '--out', out], {
      cwd: root,
      env: { PATH: process.env.PATH },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    code = await new Promise((resolve) => child.once('exit', resolve));
  });
  after(() => rmSync(out, { recursive: true, force: true }));

  it('runs every bench to completion and prints one table', () => {
    // a failed bench's own output (where its error is), not only the table that follows every bench
    const failed = (/\nfailed: (.+)\n/.exec(output)?.[1] ?? '').split(', ').filter(Boolean);
    const sections = failed.map(
      (name) =>
        output
          .slice(output.indexOf(`\n== ${name}\n`))
          .split(/\n== /)[1]
          ?.slice(-4000) ?? '',
    );
    expect(code, [...sections, output.slice(-3000)].join('\n…\n')).to.equal(0);
    expect(benches).to.include.members(['hash', 'api', 'pipeline', 'webhooks', 'listing', 'sockets']);
    expect(output).to.match(/bench\s+figure\s+median/);
  });

  for (const name of ['hash', 'api', 'pipeline', 'webhooks', 'listing', 'sockets']) {
    it(`${name}: a results JSON with the machine, the versions and numeric figures`, () => {
      const result = JSON.parse(readFileSync(path.join(out, `${name}.json`), 'utf8'));
      expect(result.bench).to.equal(name);
      expect(result.smoke).to.equal(true);
      expect(result.machine.cpus).to.be.a('number').above(0);
      expect(result.machine.meltdownMitigation).to.be.a('string').that.is.not.empty;
      expect(result.machine.pcid).to.be.a('boolean');
      expect(result.node).to.equal(process.version);
      expect(result.versions).to.include.keys('koa', 'bullmq', 'postgresql', 'redis');
      expect(result.figures).to.be.an('array').that.is.not.empty;
      for (const figure of result.figures) {
        expect(figure.value, figure.id).to.be.a('number').that.satisfies(Number.isFinite);
        expect(figure.runs, figure.id).to.be.an('array').that.is.not.empty;
        if (figure.floor) expect(figure.floor.value, `${figure.id} floor`).to.satisfy(Number.isFinite);
      }
    });
  }

  it('pipeline: the chain node measured apart, and the confirm → webhook window per process with the blocks built in it', () => {
    const result = JSON.parse(readFileSync(path.join(out, 'pipeline.json'), 'utf8'));
    const figure = (id: string) => result.figures.find((f: { id: string }) => f.id === id) as { value: number; runs: number[] };
    const value = (id: string) => figure(id)?.value;
    expect(value('cpu_ms_bench_chain_node_chopsticks_process_')).to.be.above(0);
    expect(value('cpu_ms_bench_process_clients_receiver_chain_')).to.be.closeTo(
      value('cpu_ms_bench_chain_node_chopsticks_process_') + value('cpu_ms_bench_clients_receiver_s3rver'),
      0.05,
    );
    expect(value('window_cpu_s_chain_node_chopsticks_process')).to.be.above(0);
    expect(value('window_capacity_cpu_s')).to.be.closeTo(result.machine.cpus * value('window_s'), 0.05);
    expect(value('window_cpu_s_counted')).to.be.at.least(value('window_cpu_s_service'));
    // every registration was carried by a block the chain built between the first confirm and the last webhook
    const blocks = result.parameters.window_blocks[0] as { registrations: number; signed_before_ms: number[] }[];
    expect(blocks.length).to.equal(value('window_blocks')).and.be.above(0);
    expect(blocks.reduce((n, b) => n + b.registrations, 0)).to.equal(result.parameters.registrations);
    expect(blocks.flatMap((b) => b.signed_before_ms)).to.have.length(value('extrinsics'));
    // the warm-up burst is reported apart, and the medians are of the runs after it only
    expect(figure('first_burst_latency_p95_ms').runs).to.have.length(1);
    expect(figure('first_burst_latency_p95_ms').runs[0]).to.be.above(0);
    expect(figure('first_burst_cpu_ms_service_total').runs[0]).to.be.above(0);
    // and its cost by part, as the runs': the web's and each worker's
    for (const part of ['web', 'worker_chain', 'worker_certificates', 'postgres'])
      expect(figure(`first_burst_cpu_ms_${part}`).runs[0], part).to.be.above(0);
    expect(figure('latency_p95_ms').runs).to.have.length(result.parameters.runs);
    expect(result.parameters.window_blocks).to.have.length(result.parameters.runs);
  });

  it("webhooks: each run ends with the machine's tax on a kernel entry, directly and on a delivery's computation beside it", () => {
    const result = JSON.parse(readFileSync(path.join(out, 'webhooks.json'), 'utf8'));
    const figure = (id: string) => result.figures.find((f: { id: string }) => f.id === id) as { value: number; runs: number[] };
    for (const id of ['kernel_entry_us', 'delivery_work_us', 'delivery_work_after_entry_us']) {
      expect(figure(id), id).to.exist;
      expect(figure(id).runs, id).to.have.length(result.parameters.runs);
      expect(figure(id).value, id).to.be.above(0);
    }
  });

  it("chain-limits: the runtime's calls per block, bound by the lesser of weight and length, and the day's ceiling from them", () => {
    const result = JSON.parse(readFileSync(path.join(out, 'chain-limits.json'), 'utf8'));
    const value = (id: string) => result.figures.find((f: { id: string }) => f.id === id)?.value as number;
    expect(value('calls_per_block')).to.be.a('number').above(0);
    expect(value('calls_per_block')).to.equal(Math.min(value('calls_per_block_by_ref_time'), value('calls_per_block_by_length')));
    expect(value('calls_per_batch')).to.be.above(0).and.at.most(value('calls_per_block'));
    expect(value('registrations_per_day_6s')).to.equal(Math.floor((value('calls_per_block') * 86_400) / 6));
  });

  it('chain-alone: every call carried by a block in each run of both ways, the aligned way in one extrinsic per block', () => {
    const result = JSON.parse(readFileSync(path.join(out, 'chain-alone.json'), 'utf8'));
    const value = (id: string) => result.figures.find((f: { id: string }) => f.id === id)?.value as number;
    type Ride = { p50: number; p95: number; extrinsics: number; blocks: { calls: number; buildMs: number }[] };
    for (const strategy of ['interval', 'aligned']) {
      const rides = result.parameters.rides[strategy] as Ride[];
      expect(rides, strategy).to.have.length(result.parameters.runs);
      for (const ride of rides) {
        expect(
          ride.blocks.reduce((n, b) => n + b.calls, 0),
          strategy,
        ).to.equal(result.parameters.calls);
        expect(ride.p95, strategy).to.be.at.least(ride.p50).and.above(0);
      }
      expect(value(`${strategy}_p95_ms`), strategy).to.be.at.least(value(`${strategy}_p50_ms`));
    }
    for (const ride of result.parameters.rides.aligned as Ride[]) expect(ride.extrinsics).to.be.at.most(ride.blocks.length);
  });
});
