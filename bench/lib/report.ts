import os from 'node:os';
import path from 'node:path';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { median, round } from './stats';

/** A measured figure: the median of its runs, beside its floor measured in the same run. */
export interface Figure {
  readonly id: string;
  readonly label: string;
  readonly unit: string;
  /** Median of `runs`. */
  readonly value: number;
  readonly runs: readonly number[];
  readonly floor?: { readonly label: string; readonly value: number; readonly runs: readonly number[] };
  /** `runsMet`: in how many runs the target held, when it was judged run by run (see `judge`). */
  readonly target?: { readonly text: string; readonly met: boolean; readonly runsMet?: number };
}

export interface FigureInput {
  readonly id: string;
  readonly label: string;
  readonly unit: string;
  readonly runs: readonly number[];
  readonly floor?: { readonly label: string; readonly runs: readonly number[] };
  /** Whether the target holds for a value (in each run, beside that run's floor, when the floor was measured run by run). */
  readonly target?: { readonly text: string; readonly met: (value: number, floor: number) => boolean };
}

export function figure(input: FigureInput): Figure {
  const value = round(median(input.runs));
  const floor = input.floor
    ? { label: input.floor.label, value: round(median(input.floor.runs)), runs: input.floor.runs.map((r) => round(r)) }
    : undefined;
  return {
    id: input.id,
    label: input.label,
    unit: input.unit,
    value,
    runs: input.runs.map((r) => round(r)),
    ...(floor ? { floor } : {}),
    ...(input.target ? { target: judge(input, value, floor?.value) } : {}),
  };
}

/**
 * A target on a figure whose floor was measured run by run is judged in each run, beside that run's own floor, and
 * met when it holds in more than half of the runs: with an odd number of runs (every bench's default), the verdict
 * of the median of the runs' ratios, which the share rows give (init / healthz, deliveries / plain POSTs, prepare /
 * slower floor). The median of the figure against the median of the floor pairs numbers of different runs: on a
 * machine whose speed drifted within the bench, it gave the same target the opposite verdict of its share row, each
 * way round (docs/performance.md, section 44). A target that reads no floor comes to the verdict of the median over
 * an odd number of runs, and over an even number a `≤` target now needs more than half of them, as a `≥` one did.
 * A target without a floor, or with one not measured run by run, is judged on the medians.
 */
function judge(input: FigureInput, value: number, floorValue: number | undefined): NonNullable<Figure['target']> {
  const { text, met } = input.target!;
  const floorRuns = input.floor?.runs;
  if (!floorRuns || floorRuns.length !== input.runs.length || input.runs.length === 0) return { text, met: met(value, floorValue ?? NaN) };
  const runsMet = input.runs.filter((run, i) => met(run, floorRuns[i]!)).length;
  return { text, met: runsMet > input.runs.length / 2, runsMet };
}

export interface BenchResult {
  readonly bench: string;
  readonly smoke: boolean;
  readonly startedAt: string;
  readonly durationSeconds: number;
  readonly machine: {
    readonly cpus: number;
    readonly cpuModel: string;
    readonly memoryGiB: number;
    readonly platform: string;
    readonly loadAverageAtStart: readonly number[];
    readonly loadAverageAtEnd: readonly number[];
    /** How the kernel isolates its page tables from user space (`Mitigation: PTI` makes every kernel entry switch them), and whether the CPU offers PCID to keep the TLB across that switch: what a kernel entry costs (docs/performance.md, section 37). */
    readonly meltdownMitigation: string;
    readonly pcid: boolean;
  };
  readonly node: string;
  readonly versions: Record<string, string>;
  readonly parameters: Record<string, unknown>;
  readonly figures: readonly Figure[];
  readonly notes: readonly string[];
}

const PACKAGES = [
  'koa',
  'bullmq',
  'ioredis',
  'knex',
  'pg',
  '@polkadot/api',
  '@acala-network/chopsticks',
  '@aws-sdk/client-s3',
  's3rver',
  'ws',
  'socket.io',
  'autocannon',
  'tsx',
];

/** Versions of the packages in play, as installed. */
export function packageVersions(): Record<string, string> {
  const root = path.resolve(__dirname, '../..');
  const out: Record<string, string> = {};
  for (const name of PACKAGES) {
    try {
      out[name] = JSON.parse(readFileSync(path.join(root, 'node_modules', name, 'package.json'), 'utf8')).version;
    } catch {
      out[name] = 'not installed';
    }
  }
  return out;
}

/** Collects a bench's figures and writes `<out>/<name>.json` and a table. */
export class BenchReport {
  private readonly started = Date.now();
  private readonly loadAtStart = os.loadavg();
  private readonly figures: Figure[] = [];
  private readonly notes: string[] = [];
  readonly versions: Record<string, string> = { ...packageVersions() };

  constructor(
    readonly bench: string,
    private readonly smoke: boolean,
    readonly parameters: Record<string, unknown>,
  ) {}

  add(input: FigureInput): Figure {
    const made = figure(input);
    this.figures.push(made);
    return made;
  }

  note(text: string): void {
    this.notes.push(text);
  }

  write(outDir: string): BenchResult {
    const result: BenchResult = {
      bench: this.bench,
      smoke: this.smoke,
      startedAt: new Date(this.started).toISOString(),
      durationSeconds: round((Date.now() - this.started) / 1000, 1),
      machine: {
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model ?? 'unknown',
        memoryGiB: round(os.totalmem() / 2 ** 30, 1),
        platform: `${os.platform()} ${os.release()}`,
        loadAverageAtStart: this.loadAtStart.map((l) => round(l)),
        loadAverageAtEnd: os.loadavg().map((l) => round(l)),
        meltdownMitigation: readOr('/sys/devices/system/cpu/vulnerabilities/meltdown', 'unknown').trim(),
        pcid: /^flags\s*:.*\bpcid\b/m.test(readOr('/proc/cpuinfo', '')),
      },
      node: process.version,
      versions: this.versions,
      parameters: this.parameters,
      figures: this.figures,
      notes: this.notes,
    };
    mkdirSync(outDir, { recursive: true });
    writeFileSync(path.join(outDir, `${this.bench}.json`), JSON.stringify(result, null, 2) + '\n');
    process.stdout.write(renderTable([result]) + '\n');
    for (const note of this.notes) process.stdout.write(`  note: ${note}\n`);
    return result;
  }
}

/** One table of every figure of the given results: median, runs, floor, target. */
export function renderTable(results: readonly BenchResult[]): string {
  const rows: string[][] = [['bench', 'figure', 'median', 'runs', 'floor (same run)', 'target', 'met']];
  for (const r of results) {
    for (const f of r.figures) {
      rows.push([
        r.bench,
        f.label,
        `${fmt(f.value)} ${f.unit}`,
        f.runs.map(fmt).join(' / '),
        f.floor ? `${f.floor.label}: ${fmt(f.floor.value)}` : '',
        f.target?.text ?? '',
        f.target
          ? `${f.target.met ? 'yes' : 'NO'}${f.target.runsMet === undefined ? '' : ` (${f.target.runsMet} of ${f.runs.length} runs)`}`
          : '',
      ]);
    }
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)));
  const line = (row: string[]) =>
    row
      .map((cell, c) => cell.padEnd(widths[c]!))
      .join('  ')
      .trimEnd();
  return [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

function fmt(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  return String(round(value, 2));
}

function readOr(file: string, fallback: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return fallback;
  }
}
