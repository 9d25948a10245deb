/**
 * `npm run soak [-- --minutes N]`: steady mixed load (registrations to finality, listing, transaction
 * polling, health) against a web and workers in this process, on the test harness's real services (the
 * chain in a child process, so its blocks are not counted). Every
 * `--sample` seconds it prints memory (after a full GC) and request latency; it fails when memory grows
 * and does not level off (the last third of the run above the middle third by more than the tolerance).
 */
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { startTestServices, stopTestServices } from '../helpers/services';
import { call, logLines, startApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers } from '../helpers/workers';
import { register } from '../helpers/registration';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const MINUTES = arg('minutes', 15);
const SAMPLE_SECONDS = arg('sample', 30);
const TOLERANCE = 0.1; // the last third may sit at most 10% above the middle third
const gc = (globalThis as { gc?: () => void }).gc;

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : 0;
};

async function main(): Promise<number> {
  if (!gc) throw new Error('run with --expose-gc (npm run soak does)');
  // the chain runs in a child process: what is measured here is the web and the workers
  process.env.RELAYER_SEED_TESTNET = '//SoakRelayer';
  const chainProcess = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'chain.ts')], {
    env: process.env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // the chain goes with the soak however it ends (a failed soak once left its chain running)
  process.once('exit', () => chainProcess.kill('SIGTERM'));
  process.env.CHAIN_TESTNET_WS = await new Promise<string>((resolve, reject) => {
    chainProcess.stdout!.once('data', (line: Buffer) => resolve(JSON.parse(line.toString()).wsUrl));
    chainProcess.once('exit', () => reject(new Error('the soak chain exited')));
  });
  const services = await startTestServices();
  const app = await startApp(services.config);
  const workers = await startTestWorkers(services.config, ['prepare', 'chain', 'webhooks']);
  const org = await createOrg(app.context, 100_000_000);
  const key = await createKey(app.context, org);
  const end = Date.now() + MINUTES * 60_000;
  let latencies: number[] = [];
  let requests = 0;
  let errors = 0;
  const timed = async (send: () => Promise<{ status: number }>) => {
    const t0 = performance.now();
    const reply = await send();
    latencies.push(performance.now() - t0);
    requests++;
    if (reply.status >= 500) errors++;
    return reply;
  };

  const transactions: string[] = [];
  const registrationErrors: string[] = [];
  const loops = [
    // registrations, one after another, each followed to its end by polling
    async () => {
      while (Date.now() < end) {
        try {
          const r = await register(app.url, key.token, undefined, randomBytes(32 * 1024));
          transactions.push(r.confirm.body.transaction_id);
        } catch (err) {
          // an answer a partner would retry (a 503 when the machine is overloaded, say): counted and shown, not fatal
          registrationErrors.push((err as Error).message);
          errors++;
        }
      }
    },
    // readers: listing and polling
    ...Array.from({ length: 3 }, () => async () => {
      while (Date.now() < end) {
        await timed(() => call(app.url, 'GET', '/v1/works?network=testnet&first=20', { token: key.token }));
        const tx = transactions[Math.floor(Math.random() * transactions.length)];
        if (tx) await timed(() => call(app.url, 'GET', `/v1/transactions/${tx}`, { token: key.token }));
        await timed(() => call(app.url, 'GET', '/healthz'));
      }
    }),
  ];

  const samples: { minute: number; heapMb: number; rssMb: number }[] = [];
  process.stdout.write(
    `soak: ${MINUTES} min, a sample every ${SAMPLE_SECONDS} s\n| minute | heap MB (after GC) | RSS MB | requests | p50 ms | p99 ms | 5xx |\n|---|---|---|---|---|---|---|\n`,
  );
  const started = Date.now();
  const sampler = setInterval(() => {
    // the test harness keeps every log line for its secret scan: not the service's memory
    logLines.length = 0;
    gc();
    const mem = process.memoryUsage();
    const sample = { minute: (Date.now() - started) / 60_000, heapMb: mem.heapUsed / 2 ** 20, rssMb: mem.rss / 2 ** 20 };
    samples.push(sample);
    process.stdout.write(
      `| ${sample.minute.toFixed(1)} | ${sample.heapMb.toFixed(1)} | ${sample.rssMb.toFixed(1)} | ${requests} | ${percentile(latencies, 50).toFixed(1)} | ${percentile(latencies, 99).toFixed(1)} | ${errors} |\n`,
    );
    latencies = [];
    requests = 0;
    errors = 0;
  }, SAMPLE_SECONDS * 1000);
  await Promise.all(loops.map((loop) => loop()));
  clearInterval(sampler);

  const finalized = await app.context
    .db('transactions')
    .whereIn('id', transactions)
    .where({ status: 'finalized' })
    .count<{ n: string }[]>('* as n');
  await workers.stop();
  await app.close();
  await stopTestServices();
  chainProcess.kill('SIGTERM');

  const third = Math.max(1, Math.floor(samples.length / 3));
  const mean = (xs: typeof samples) => xs.reduce((s, x) => s + x.heapMb, 0) / xs.length;
  const middle = mean(samples.slice(third, 2 * third));
  const last = mean(samples.slice(-third));
  const flat = samples.length < 3 || last <= middle * (1 + TOLERANCE);
  process.stdout.write(
    `\n${transactions.length} registrations (${(finalized[0] as unknown as { n: string }).n} finalized, ${registrationErrors.length} refused${registrationErrors.length ? `, e.g. ${registrationErrors[0]}` : ''}); heap after GC: middle third ${middle.toFixed(1)} MB, last third ${last.toFixed(1)} MB → ${flat ? 'flat' : 'GROWING'}\n`,
  );
  return flat ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`soak failed: ${(err as Error).stack}\n`);
    process.exit(1);
  },
);
