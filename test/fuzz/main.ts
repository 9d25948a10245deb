/**
 * `npm run fuzz [-- --cases N --seed S]`: hostile requests on every documented route against a real stack
 * (the test harness's services: PostgreSQL, Redis, S3, chain), 10,000 cases by default.
 */
import { startTestServices, stopTestServices } from '../helpers/services';
import { startApp } from '../helpers/app';
import { startTestWorkers } from '../helpers/workers';
import { fuzzStats, runFuzz } from './property';
import { fuzzTarget } from './target';

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

async function main(): Promise<number> {
  const cases = flag('cases', 10_000);
  const seed = flag('seed', Date.now() % 2 ** 31);
  const services = await startTestServices();
  const app = await startApp(services.config);
  const workers = await startTestWorkers(services.config, ['prepare']);
  const started = Date.now();
  try {
    process.stdout.write(`fuzzing ${cases} cases, seed ${seed}\n`);
    await runFuzz(await fuzzTarget(app), { numRuns: cases, seed });
    const statuses = [...fuzzStats.byStatus.entries()].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`).join(', ');
    process.stdout.write(`${fuzzStats.cases} requests in ${((Date.now() - started) / 1000).toFixed(1)} s, 0 invariant violations (${statuses})\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 1;
  } finally {
    await workers.stop();
    await app.close();
    await stopTestServices();
  }
}

main().then((code) => process.exit(code));
