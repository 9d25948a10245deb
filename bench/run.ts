import path from 'node:path';
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

/**
 * `npm run bench [-- name…]`: runs every bench/*.ts (or the named ones) one after another, each in its own
 * Node process with the garbage collector exposed so memory figures are taken after a full collection.
 */
const dir = __dirname;
const wanted = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.ts') && f !== 'run.ts')
  .filter((f) => wanted.length === 0 || wanted.some((w) => f === w || f === `${w}.ts`))
  .sort();
let failed = 0;
for (const file of files) {
  process.stdout.write(`\n== ${file}\n`);
  const run = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', path.join(dir, file)], { stdio: 'inherit' });
  if (run.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
