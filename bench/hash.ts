import path from 'node:path';
import { fork } from 'node:child_process';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { createLogger } from '../shared/logger';
import { computeCommitment, toHex } from '../shared/registration/commitment';
import type { Creator } from '../shared/works/types';
import { openResources } from '../shared/resources';
import { createOrg, createKey } from '../test/helpers/factories';
import { initBody } from '../test/helpers/registration';
import { benchMain, say } from './lib/main';
import { pick } from './lib/options';
import { BenchReport } from './lib/report';
import { startBenchServices } from './lib/services';
import { startWebProcess, startWorkerProcess } from './lib/processes';
import { msSince, repeat } from './lib/stats';
import { cpuMs, cpuSince, postgresBackends, redisCpuMs } from './lib/cpu';

/**
 * Prepare of a large upload: wall time from the prepare request to its quote (HEAD, GET streamed through
 * SHA-256, commitment, fee and dry run on the chain), beside (a) a plain S3 GET of the same object by the same
 * client in a process of its own and (b) `sha256sum` of the same bytes on local disk; and the prepare worker's
 * peak RSS increase (kernel VmHWM, reset before each prepare) in its own process. Each run prepares a fresh
 * upload (a prepare of an object already hashed reuses its hash), then prepares it again: that second prepare
 * is the fixed part alone. The chain (chopsticks) runs in a process of its own, as `pipeline`'s does.
 */
benchMain(async (options) => {
  const mb = pick(options, options.size, 256, 1);
  const runs = pick(options, options.runs, 5, 2);
  const bytes = mb * 1024 * 1024;
  const report = new BenchReport('hash', options.smoke, { upload_mb: mb, runs });
  say(`hash: ${mb} MB, ${runs} runs`);
  // the chain in a process of its own, as a node is: its fee query and dry run then never share this process, and the
  // S3 server in it, while it serves the prepare's GET, as they never did the floor's GET (docs/performance.md, section 35)
  const services = await startBenchServices('hash', { blocks: 'instant', chainProcess: true });
  Object.assign(report.versions, services.versions);
  const context = openResources(services.config, createLogger('warn'), 'dev');
  const web = await startWebProcess(services.env, options);
  const worker = await startWorkerProcess(services.env, services.config, ['prepare'], options);
  const getter = fork(path.join(__dirname, 'lib/s3-get.ts'), [], {
    execArgv: ['--expose-gc', '--import', 'tsx'],
    env: { PATH: process.env.PATH, ...services.env },
  });
  try {
    await new Promise((resolve) => getter.once('message', resolve));
    const key = await createKey(context, await createOrg(context, 1_000_000));
    const post = async (pathname: string, body: unknown) => {
      const res = await fetch(web.url + pathname, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key.token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      const json = (await res.json()) as Record<string, any>;
      if (res.status !== 200) throw new Error(`${pathname}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    };

    // the same bytes on every run, each run a fresh upload (a prepare again of the same object reuses its hash);
    // the same bytes on local disk for sha256sum
    const audio = randomBytes(bytes);
    const file = path.join(services.dataDir, 'audio.bin');
    await new Promise<void>((resolve, reject) => createWriteStream(file).on('error', reject).end(audio, resolve));
    const upload = async () => {
      const body = initBody();
      const init = await post('/v1/works/init', body);
      const put = await fetch(init.upload_url, { method: 'PUT', body: audio as unknown as BodyInit });
      if (put.status !== 200) throw new Error(`upload: ${put.status}`);
      const audioKey = new URL(init.upload_url).pathname.split('/').slice(2).join('/');
      return { jobId: init.job_id as string, audioKey, title: body.title.trim(), creators: body.creators as Creator[] };
    };
    await post('/v1/works/prepare', { job_id: (await upload()).jobId }); // warms the worker's S3, chain and database paths
    /** CPU (ms) the prepare worker, the web, PostgreSQL's backends and Redis spend on `work`. */
    const cpuOf = async (work: () => Promise<unknown>) => {
      const pg = await postgresBackends(context);
      const [before, redisBefore] = [cpuMs([worker.pid, web.pid, ...pg]), await redisCpuMs(context)];
      await work();
      const redis = (await redisCpuMs(context)) - redisBefore;
      return { worker: cpuSince(before, [worker.pid]), web: cpuSince(before, [web.pid]), postgres: cpuSince(before, pg), redis };
    };

    const samples = await repeat(runs, async (run) => {
      const { jobId, audioKey, title, creators } = await upload();
      const get = await new Promise<{ ms: number; bytes: number; peakRssIncrease: number }>((resolve) => {
        getter.once('message', resolve as (m: unknown) => void);
        getter.send({ key: audioKey });
      });
      if (get.bytes !== bytes) throw new Error(`the plain GET read ${get.bytes} bytes of ${bytes}`);

      const shaStarted = process.hrtime.bigint();
      const sha = spawnSync('sha256sum', [file], { encoding: 'utf8' });
      const shaMs = msSince(shaStarted);
      if (sha.status !== 0) throw new Error(`sha256sum: ${sha.stderr}`);

      const before = worker.rss();
      worker.resetPeak();
      const started = process.hrtime.bigint();
      let quote: Record<string, any> = {};
      const cpu = await cpuOf(async () => (quote = await post('/v1/works/prepare', { job_id: jobId })));
      const prepareMs = msSince(started);
      const rssIncrease = worker.peak() - before;
      const expected = toHex(computeCommitment(Buffer.from(sha.stdout.slice(0, 64), 'hex'), title, creators).commitment);
      if (quote.commitment !== expected)
        throw new Error(`the quote's commitment ${quote.commitment} is not the one of these bytes, ${expected}`);

      // the same job again: the object and its hash are known, so this is the fixed part alone (HEAD, the job's
      // round trips through Redis and BullMQ, wallet and balance, fee and dry run)
      const againStarted = process.hrtime.bigint();
      const fixedCpu = await cpuOf(() => post('/v1/works/prepare', { job_id: jobId }));
      const fixedMs = msSince(againStarted);
      say(
        `  run ${run + 1}: prepare ${prepareMs.toFixed(0)} ms (again, hash known: ${fixedMs.toFixed(0)} ms), S3 GET ${get.ms.toFixed(0)} ms, sha256sum ${shaMs.toFixed(0)} ms, worker peak RSS +${(rssIncrease / 2 ** 20).toFixed(1)} MiB`,
      );
      say(
        `    CPU (ms): prepare worker ${cpu.worker.toFixed(0)} (again ${fixedCpu.worker.toFixed(0)}), web ${cpu.web.toFixed(0)} (${fixedCpu.web.toFixed(0)}), PostgreSQL ${cpu.postgres.toFixed(0)} (${fixedCpu.postgres.toFixed(0)}), Redis ${cpu.redis.toFixed(0)} (${fixedCpu.redis.toFixed(0)})`,
      );
      return { prepareMs, fixedMs, getMs: get.ms, shaMs, rssIncrease, getRssIncrease: get.peakRssIncrease, cpu, fixedCpu };
    });

    const slower = samples.map((s) => Math.max(s.getMs, s.shaMs));
    report.add({
      id: 'prepare_ms',
      label: `prepare ${mb} MB, request to quote`,
      unit: 'ms',
      runs: samples.map((s) => s.prepareMs),
      floor: { label: 'slower of S3 GET and sha256sum', runs: slower },
      target: { text: '≤ 1.15 × slower floor', met: (v, floor) => v <= 1.15 * floor },
    });
    report.add({
      id: 'prepare_ratio',
      label: 'prepare / slower floor',
      unit: '×',
      runs: samples.map((s, i) => s.prepareMs / slower[i]!),
      target: { text: '≤ 1.15', met: (v) => v <= 1.15 },
    });
    report.add({
      id: 'prepare_again_ms',
      label: 'prepare again, hash known (the fixed part)',
      unit: 'ms',
      runs: samples.map((s) => s.fixedMs),
    });
    report.add({ id: 's3_get_ms', label: `plain S3 GET ${mb} MB`, unit: 'ms', runs: samples.map((s) => s.getMs) });
    report.add({ id: 'sha256sum_ms', label: `sha256sum ${mb} MB, local disk`, unit: 'ms', runs: samples.map((s) => s.shaMs) });
    report.add({
      id: 'prepare_worker_peak_rss_increase_mb',
      label: 'prepare worker peak RSS increase',
      unit: 'MiB',
      runs: samples.map((s) => s.rssIncrease / 2 ** 20),
      floor: { label: 'plain S3 GET process', runs: samples.map((s) => s.getRssIncrease / 2 ** 20) },
      target: { text: '< 64 MiB', met: (v) => v < 64 },
    });
    for (const part of ['worker', 'web', 'postgres', 'redis'] as const) {
      report.add({
        id: `prepare_cpu_ms_${part}`,
        label: `prepare ${mb} MB: CPU of ${part === 'worker' ? 'the prepare worker' : part === 'web' ? 'the web' : part}`,
        unit: 'ms',
        runs: samples.map((s) => s.cpu[part]),
        floor: { label: 'prepare again: the same', runs: samples.map((s) => s.fixedCpu[part]) },
      });
    }
    report.add({
      id: 'prepare_cpu_ms_per_mb_worker',
      label: "the prepare worker's CPU per MB (prepare less prepare again, over the size)",
      unit: 'ms/MB',
      runs: samples.map((s) => (s.cpu.worker - s.fixedCpu.worker) / mb),
    });
    report.note('sha256sum reads a file just written, so from the page cache; s3rver serves the object from a file on the same disk.');
    report.write(options.outDir);
  } finally {
    getter.kill();
    await worker.stop();
    await web.stop();
    await context.close();
    await services.stop();
  }
});
