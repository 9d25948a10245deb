import path from 'node:path';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { benchArgs, parseBenchArgs } from './lib/options';
import { renderTable, type BenchResult } from './lib/report';

/**
 * `npm run bench [-- name…] [--size N] [--runs N] [--connections N] [--smoke] [--out DIR] [--profile DIR]`:
 * runs every bench/*.ts (or the named ones) one after another, each in its own Node process with the garbage
 * collector exposed so memory figures are taken after a full collection, then prints one table of every
 * figure. Each bench writes `<out>/<name>.json` (bench/results by default).
 */
const dir = __dirname;
const options = parseBenchArgs(process.argv.slice(2));
const available = readdirSync(dir)
  .filter((f) => f.endsWith('.ts') && f !== 'run.ts')
  .map((f) => f.slice(0, -3))
  .sort();
const unknown = options.names.filter((n) => !available.includes(n.replace(/\.ts$/, '')));
if (unknown.length) {
  process.stderr.write(`unknown bench ${unknown.join(', ')}; available: ${available.join(', ')}\n`);
  process.exit(2);
}
const names = options.names.length ? options.names.map((n) => n.replace(/\.ts$/, '')) : available;
const started = Date.now();
const failed: string[] = [];
const results: BenchResult[] = [];
for (const name of names) {
  process.stdout.write(`\n== ${name}\n`);
  const file = path.join(options.outDir, `${name}.json`);
  const before = mtime(file);
  const run = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', path.join(dir, `${name}.ts`), ...benchArgs(options)], {
    stdio: 'inherit',
  });
  if (run.status !== 0 || mtime(file) === before) failed.push(name);
  else results.push(JSON.parse(readFileSync(file, 'utf8')) as BenchResult);
}
process.stdout.write(
  `\n== ${results.length} of ${names.length} benches in ${Math.round((Date.now() - started) / 1000)} s, results in ${path.relative(process.cwd(), options.outDir) || '.'}\n\n`,
);
if (results.length) process.stdout.write(renderTable(results) + '\n');
if (failed.length) process.stdout.write(`\nfailed: ${failed.join(', ')}\n`);
process.exit(failed.length ? 1 : 0);

function mtime(file: string): number | undefined {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
}
