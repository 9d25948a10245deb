import os from 'node:os';
import type { Resources } from '../../shared/resources';
import { say } from './main';
import type { BenchReport } from './report';
import { BENCH_PART, CHAIN_PART, type Carried, type WindowBlock, type WindowCpu } from './window';

// The pipeline bench's first-confirm → last-webhook window: printed, and its figures (window_*) in the results.

/** What the registrations `ids` put in each block, by block number: how many, in which relayer extrinsics signed when. */
export async function carriedPerBlock(app: Resources, ids: string[]): Promise<Map<number, Carried>> {
  const rows: { block_number: number | string; created_at: Date; n: number }[] = await app
    .db('transactions as t')
    .join('chain_submissions as s', 's.id', 't.submission_id')
    .whereIn('t.id', ids)
    .groupBy('t.block_number', 's.id', 's.created_at')
    .select('t.block_number', 's.created_at', app.db.raw('count(*)::int as n'));
  const out = new Map<number, { registrations: number; extrinsics: { signedAt: number; registrations: number }[] }>();
  for (const row of rows) {
    const block = out.get(Number(row.block_number)) ?? { registrations: 0, extrinsics: [] };
    block.registrations += row.n;
    block.extrinsics.push({ signedAt: new Date(row.created_at).getTime(), registrations: row.n });
    out.set(Number(row.block_number), block);
  }
  return out;
}

/** Prints the window's CPU per part against the machine's capacity, and the blocks the chain built in it. */
export function sayWindow(window: WindowCpu, built: WindowBlock[], carried: Map<number, Carried>): void {
  const s = (cpuS: number) => cpuS.toFixed(2);
  const service = Object.entries(window.parts).filter(([part]) => part !== CHAIN_PART && part !== BENCH_PART);
  say(
    `  first confirm → last webhook: ${window.seconds.toFixed(1)} s × ${os.cpus().length} cores = ${s(window.capacityCpuS)} CPU-s of capacity; ` +
      `CPU-s used: ${service.map(([part, cpuS]) => `${part} ${s(cpuS)}`).join(', ')} = service ${s(window.serviceCpuS)}; ` +
      `${CHAIN_PART} ${s(window.parts[CHAIN_PART]!)}; ${BENCH_PART} ${s(window.parts[BENCH_PART]!)}; ` +
      `all counted ${s(window.accountedCpuS)}; the whole machine busy ${s(window.machineBusyCpuS)} (every process, other users' too)`,
  );
  say(
    `  of which runnable but waiting for a core (s, summed over each process's threads): ${Object.entries(window.waits)
      .map(([part, waitS]) => `${part} ${s(waitS)}`)
      .join(', ')}`,
  );
  const outside = [...carried.keys()].filter((n) => !built.some((b) => b.number === n));
  say(
    '  blocks built in that window (number: ms since the block before, ms building it, chain CPU ms since the block before, ' +
      `registrations [ms from each extrinsic's signing to the building's start]): ${built
        .map(
          (b) =>
            `#${b.number}: ${b.intervalMs}, ${b.buildMs}, ${Math.round(b.chainCpuMs)}, ${b.registrations} [${b.signedBeforeMs.join(', ')}]`,
        )
        .join('; ')}` +
      (outside.length
        ? `; registrations in blocks outside it: ${outside.map((n) => `#${n} ${carried.get(n)!.registrations}`).join(', ')}`
        : ''),
  );
}

type Sample = { window: WindowCpu; built: WindowBlock[] };

/** The window's figures: its length and capacity, each part's CPU-seconds in it, and the chain's pace in it. */
export function addWindowFigures(report: BenchReport, samples: readonly Sample[], blockMs: number): void {
  const slug = (part: string) => part.replace(/\W+/g, '_').replace(/^_|_$/g, '');
  const mean = (values: number[]) => {
    const known = values.filter(Number.isFinite);
    return known.length ? known.reduce((a, b) => a + b, 0) / known.length : 0;
  };
  report.add({ id: 'window_s', label: 'window: first confirm to last webhook', unit: 's', runs: samples.map((s) => s.window.seconds) });
  report.add({
    id: 'window_capacity_cpu_s',
    label: `window: the machine's capacity (${os.cpus().length} cores × the window)`,
    unit: 'CPU-s',
    runs: samples.map((s) => s.window.capacityCpuS),
  });
  for (const part of Object.keys(samples[0]!.window.parts))
    report.add({
      id: `window_cpu_s_${slug(part)}`,
      label: `window CPU: ${part}`,
      unit: 'CPU-s',
      runs: samples.map((s) => s.window.parts[part]!),
    });
  for (const part of Object.keys(samples[0]!.window.waits))
    report.add({
      id: `window_wait_s_${slug(part)}`,
      label: `window, runnable but waiting for a core: ${part}`,
      unit: 's',
      runs: samples.map((s) => s.window.waits[part]!),
    });
  report.add({
    id: 'window_cpu_s_service',
    label: 'window CPU: service total (web, workers, PostgreSQL backends, Redis)',
    unit: 'CPU-s',
    runs: samples.map((s) => s.window.serviceCpuS),
  });
  report.add({
    id: 'window_cpu_s_counted',
    label: 'window CPU: every part counted',
    unit: 'CPU-s',
    runs: samples.map((s) => s.window.accountedCpuS),
  });
  report.add({
    id: 'window_cpu_s_machine',
    label: "window CPU: the whole machine busy (every process, other users' too)",
    unit: 'CPU-s',
    runs: samples.map((s) => s.window.machineBusyCpuS),
  });
  report.add({ id: 'window_blocks', label: 'window: blocks the chain built', unit: 'blocks', runs: samples.map((s) => s.built.length) });
  report.add({
    id: 'window_block_interval_ms',
    label: 'window: block interval (mean)',
    unit: 'ms',
    runs: samples.map((s) => mean(s.built.map((b) => b.intervalMs))),
    floor: { label: 'asked of the chain', runs: samples.map(() => blockMs) },
  });
  report.add({
    id: 'window_block_interval_max_ms',
    label: 'window: block interval (longest)',
    unit: 'ms',
    runs: samples.map((s) => Math.max(0, ...s.built.map((b) => b.intervalMs).filter(Number.isFinite))),
  });
  report.add({
    id: 'window_block_build_ms',
    label: 'window: time building a block (mean)',
    unit: 'ms',
    runs: samples.map((s) => mean(s.built.map((b) => b.buildMs))),
  });
  report.add({
    id: 'window_registrations_missed_block',
    label: 'window: registrations whose extrinsic was signed before the block before theirs began building',
    unit: 'registrations',
    runs: samples.map((s) => s.built.reduce((n, b) => n + b.missedBlock, 0)),
  });
  report.add({
    id: 'window_registrations_per_block_max',
    label: 'window: registrations in the fullest block',
    unit: 'registrations',
    runs: samples.map((s) => Math.max(0, ...s.built.map((b) => b.registrations))),
  });
}
