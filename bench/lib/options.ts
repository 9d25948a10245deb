import path from 'node:path';
import { parseArgs } from 'node:util';

/**
 * The command line every bench takes (passed on by `npm run bench -- [name…] [flags]`):
 * `--size N` the bench's own size (hash: MB, api: seconds, pipeline: registrations, webhooks: events,
 * listing: works, sockets: sockets), `--connections N` (api), `--runs N` repetitions, `--out DIR` where the
 * JSON goes (bench/results), `--smoke` every size tiny (the smoke test), `--profile DIR` CPU profiles of the
 * service's processes (node --cpu-prof) written there, `--logs DIR` the log lines of the service's processes
 * (LOG_LEVEL as configured) written there, one file per process, `--redis-split` (pipeline) Redis's command time by
 * queue and by kind of the service's own keys (redis-split.ts), `--perf` the service's processes (and the webhooks
 * floor's sender) started so that `perf` can name their compiled JavaScript (processes.ts, perfFlags).
 */
export interface BenchOptions {
  readonly smoke: boolean;
  readonly size: number | undefined;
  readonly runs: number | undefined;
  readonly connections: number | undefined;
  readonly outDir: string;
  readonly profileDir: string | undefined;
  readonly logDir: string | undefined;
  readonly redisSplit: boolean;
  readonly perf: boolean;
  readonly names: string[];
}

export const RESULTS_DIR = path.resolve(__dirname, '../results');

export function parseBenchArgs(argv: readonly string[]): BenchOptions {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      smoke: { type: 'boolean', default: false },
      size: { type: 'string' },
      runs: { type: 'string' },
      connections: { type: 'string' },
      out: { type: 'string' },
      profile: { type: 'string' },
      logs: { type: 'string' },
      'redis-split': { type: 'boolean', default: false },
      perf: { type: 'boolean', default: false },
    },
  });
  const num = (name: string, raw: string | undefined) => {
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got ${raw}`);
    return n;
  };
  return {
    smoke: Boolean(values.smoke),
    size: num('size', values.size),
    runs: num('runs', values.runs),
    connections: num('connections', values.connections),
    outDir: path.resolve(values.out ?? RESULTS_DIR),
    profileDir: values.profile ? path.resolve(values.profile) : undefined,
    logDir: values.logs ? path.resolve(values.logs) : undefined,
    redisSplit: Boolean(values['redis-split']),
    perf: Boolean(values.perf),
    names: positionals,
  };
}

/** The flags again, for the runner to pass to each bench process. */
export function benchArgs(options: BenchOptions): string[] {
  const args: string[] = [];
  if (options.smoke) args.push('--smoke');
  if (options.size !== undefined) args.push('--size', String(options.size));
  if (options.runs !== undefined) args.push('--runs', String(options.runs));
  if (options.connections !== undefined) args.push('--connections', String(options.connections));
  args.push('--out', options.outDir);
  if (options.profileDir) args.push('--profile', options.profileDir);
  if (options.logDir) args.push('--logs', options.logDir);
  if (options.redisSplit) args.push('--redis-split');
  if (options.perf) args.push('--perf');
  return args;
}

/** A bench's parameter: the explicit flag, else its smoke or full default. */
export function pick(options: BenchOptions, explicit: number | undefined, full: number, smoke: number): number {
  return explicit ?? (options.smoke ? smoke : full);
}
