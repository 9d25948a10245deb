/**
 * `npm run fuzz [-- --cases N --seed S]`: hostile requests on every documented route against a real stack
 * (the test harness's services: PostgreSQL, Redis, S3, chain), 10,000 cases by default.
 * `npm run fuzz -- --lifecycle [--runs N --seed S]`: the job lifecycle's model-based test
 * (test/lifecycle/model.ts), 100 sequences by default.
 */
import { startTestServices, stopTestServices } from '../helpers/services';
import { startApp } from '../helpers/app';
import { startTestWorkers } from '../helpers/workers';
import { fuzzStats, runFuzz } from './property';
import { fuzzTarget } from './target';
import { lifecycleTarget, runLifecycle } from '../lifecycle/model';

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

async function lifecycle(): Promise<number> {
  const runs = flag('runs', 100);
  const seed = flag('seed', Date.now() % 2 ** 31);
  const services = await startTestServices();
  const app = await startApp(services.config);
  const workers = await startTestWorkers(services.config, ['prepare', 'chain']);
  const target = await lifecycleTarget(app);
  const started = Date.now();
  try {
    process.stdout.write(`running ${runs} lifecycle sequences, seed ${seed}\n`);
    const stats = await runLifecycle(target, { numRuns: runs, seed });
    process.stdout.write(
      `${stats.sequences} sequences (${stats.commands} commands drawn, ${stats.requests} requests) in ${((Date.now() - started) / 1000).toFixed(1)} s: every invariant held\n`,
    );
    return 0;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${String((err as Error).cause ?? '')}\n`);
    return 1;
  } finally {
    await target.close();
    await workers.stop();
    await app.close();
    await stopTestServices();
  }
}

async function main(): Promise<number> {
  if (process.argv.includes('--lifecycle')) return lifecycle();
  const cases = flag('cases', 10_000);
  const seed = flag('seed', Date.now() % 2 ** 31);
  const services = await startTestServices();
  const app = await startApp(services.config);
  const workers = await startTestWorkers(services.config, ['prepare']);
  const started = Date.now();
  try {
    process.stdout.write(`fuzzing ${cases} cases, seed ${seed}\n`);
    await runFuzz(await fuzzTarget(app), { numRuns: cases, seed });
    const statuses = [...fuzzStats.byStatus.entries()]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s}: ${n}`)
      .join(', ');
    process.stdout.write(
      `${fuzzStats.cases} requests in ${((Date.now() - started) / 1000).toFixed(1)} s, 0 invariant violations (${statuses})\n`,
    );
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
