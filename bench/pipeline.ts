import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { QUEUE_NAMES } from '../shared/config';
import { createLogger } from '../shared/logger';
import { openResources, type Resources } from '../shared/resources';
import { AnchorService } from '../shared/chain/anchors';
import { createOrg, createKey, type TestKey } from '../test/helpers/factories';
import { initBody } from '../test/helpers/registration';
import { WebhookReceiver } from '../test/helpers/receiver';
import { benchMain, say } from './lib/main';
import { pick } from './lib/options';
import { BenchReport } from './lib/report';
import { startBenchServices } from './lib/services';
import { startWebProcess, startWorkerProcess, type WorkerProcess } from './lib/processes';
import { cpuMs, cpuSince, postgresBackends, redisCpuMs } from './lib/cpu';
import { chainCapacity } from './lib/chain-floor';
import { startRedisSplit } from './lib/redis-split';
import { BENCH_PART, CHAIN_PART, cpuSnapshot, windowBlocks, windowCpu } from './lib/window';
import { addWindowFigures, carriedPerBlock, sayWindow } from './lib/window-report';
import { percentile, repeat } from './lib/stats';

/**
 * Registrations end to end, as partners drive them: N registrations of 64 KB of audio, CLIENTS at a time, on a
 * chain building a block every 2 s (as `npm run dev`), the web and one worker process per queue (the Procfile's
 * lines). First every registration goes init → PUT → prepare, then every one is confirmed, and each is followed
 * to its `work_registered` webhook. The two phases are apart because the local chain (chopsticks) executes
 * every prepare's dry run and fee query on the same single thread that builds its blocks: a node serves those
 * from RPC threads and keeps its block time, and confirm → webhook is meant to measure the service's pipeline
 * against that block time, not the local chain's backlog of dry runs. The block interval the chain kept while
 * the confirms were carried is reported beside it. The floor is the chain's: the blocks its weight and length
 * limits need for N such calls, times the block time. The runs follow a first burst of the same size that warms
 * every process, as the other benches warm theirs; that burst's p95 and cost are reported apart (first_burst_*).
 */
const BLOCK_MS = 2000;
const CLIENTS = 100;
const PER_ORG = 20; // within an organization's init burst (RATE_LIMIT_BURST 100)
/** A part's name (web, worker chain, bench process (…)) as it appears in its figures' ids. */
const partId = (part: string): string => part.replace(/\W+/g, '_');

benchMain(async (options) => {
  const count = pick(options, options.size, 1000, 5);
  // a full run takes about 40 s (each prepare's dry run costs the local chain ~0.3 s); three by default after a first
  // burst that warms the processes, each figure the median of the three, as confirm → webhook and the chain's own part
  // move by seconds from one run to the next (docs/performance.md, sections 17 and 35); each run's latencies are
  // percentiles over every registration
  const runs = pick(options, options.runs, 3, 1);
  const clients = Math.min(CLIENTS, count);
  const report = new BenchReport('pipeline', options.smoke, {
    registrations: count,
    audio_kb: 64,
    block_ms: BLOCK_MS,
    clients,
    runs,
    organizations: Math.ceil(count / PER_ORG),
  });
  say(`pipeline: ${count} registrations, ${clients} clients, a block every ${BLOCK_MS} ms, ${runs} runs`);
  // the chain in a process of its own, so that the chain node's CPU is measured apart from the clients and receiver
  const services = await startBenchServices('pipeline', { blocks: BLOCK_MS, chainProcess: true });
  const chain = services.chain!;
  Object.assign(report.versions, services.versions);
  const context = openResources(services.config, createLogger('warn'), 'dev');
  const receiver = await new WebhookReceiver().start();
  const web = await startWebProcess(services.env, options);
  // one worker process per queue, as an operator scales them (a Procfile line each), so each queue's CPU is its own
  const workers = await Promise.all(
    QUEUE_NAMES.map(async (queue) => ({
      queue,
      process: await startWorkerProcess(services.env, services.config, [queue], options),
    })),
  );
  try {
    const keys: TestKey[] = [];
    for (let i = 0; i < Math.ceil(count / PER_ORG); i++)
      keys.push(await createKey(context, await createOrg(context, 1_000_000), undefined, receiver.url));
    const webhookAt = new Map<string, number>();
    receiver.respond = (entry) => {
      webhookAt.set(entry.body?.transaction_id, entry.at);
      return { status: 200 };
    };

    // a first burst, the same as the measured ones, warms every process first (as the other benches warm theirs: a
    // service runs warm in production, and a process's first burst runs code the JIT has not compiled yet and fills
    // its pools and caches); its figures are kept apart (first_burst_*), not in the medians
    const [first, ...samples] = await repeat(runs + 1, async (run) => {
      const confirmedAt = new Map<string, number>();
      const failures: string[] = [];
      const cpuBefore = await cpuOfParts(context, web.pid, workers, chain.pid);
      const renderedBefore = await certificatesDone(context);
      const split = options.redisSplit ? await startRedisSplit(context.redis, services.config.redis.prefix) : undefined;
      const started = Date.now();
      /** Runs `one` for every registration, `clients` at a time. */
      const drive = async <T>(one: (i: number) => Promise<T>): Promise<T[]> => {
        const out: T[] = [];
        let next = 0;
        const client = async () => {
          for (let i = next++; i < count; i = next++) {
            try {
              out[i] = await one(i);
            } catch (err) {
              failures.push((err as Error).message);
            }
          }
        };
        await Promise.all(Array.from({ length: clients }, client));
        if (failures.length) throw new Error(`${failures.length} registrations failed, e.g. ${failures[0]}`);
        return out;
      };
      const expected = receiver.received.length + count;
      const jobs = await drive((i) => quoteOne(web.url, keys[i % keys.length]!.token));
      const quotedAt = Date.now();
      const webQuoted = cpuMs([web.pid]);
      const blocks = await blockTimes(context, 'testnet');
      const pids = {
        web: web.pid,
        ...Object.fromEntries(workers.map((w) => [`worker ${w.queue}`, w.process.pid])),
        [CHAIN_PART]: chain.pid,
      };
      const windowStart = await cpuSnapshot(context, pids);
      const retried = { count: 0 };
      for (const [id, at] of await drive((i) => confirmOne(web.url, keys[i % keys.length]!.token, jobs[i]!, retried)))
        confirmedAt.set(id, at);
      // the web's CPU while the confirms are answered: the confirms, and the live updates every web receives meanwhile
      const webConfirms = cpuSince(webQuoted, [web.pid]) / count;
      const lastConfirm = Math.max(...confirmedAt.values());
      await receiver.waitFor(expected, 600_000);
      const windowEnd = await cpuSnapshot(context, pids);
      const intervals = blocks.stop();
      const ids = [...confirmedAt.keys()];
      const finished = Math.max(...ids.map((id) => webhookAt.get(id)!));
      const firstConfirm = Math.min(...confirmedAt.values());
      const latencies = ids.map((id) => webhookAt.get(id)! - confirmedAt.get(id)!);
      const [used] = await context
        .db('transactions')
        .whereIn('id', ids)
        .select(
          context.db.raw('count(distinct block_number)::int as blocks'),
          context.db.raw('count(distinct submission_id)::int as extrinsics'),
          context.db.raw(`count(*) filter (where status = 'finalized')::int as finalized`),
        );
      if (used.finalized !== count) throw new Error(`${count - used.finalized} registrations did not finalize`);
      const window = windowCpu(windowStart, windowEnd, [CHAIN_PART, BENCH_PART]);
      const carried = await carriedPerBlock(context, ids);
      const chainBlocks = await chain.blocks(Math.max(...carried.keys()));
      const built = windowBlocks(chainBlocks, windowStart.at, windowEnd.at, carried);
      // the chain's own part: had each call ridden the first block whose building began after its confirm was answered,
      // with nothing of the service's between (finality comes with the block on this chain), when would it have been in it
      const rides = ids.flatMap((id) => {
        const next = chainBlocks.find((b) => b.startedAt > confirmedAt.get(id)!);
        return next ? [next.builtAt - confirmedAt.get(id)!] : [];
      });
      sayWindow(window, built, carried);
      // the CPU counted is the registrations' until their last webhook, but the certificates worker's until it has
      // rendered the last of their certificates (enqueued at finalization, rendered while and after webhooks go out)
      const cpuAfter = await cpuOfParts(context, web.pid, workers, chain.pid);
      const redisParts = split ? perRegistrationUs(await split.stop(), count) : {};
      await certificatesRendered(context, renderedBefore + count);
      const certificates = workers.find((w) => w.queue === 'certificates')!;
      cpuAfter.parts[`worker ${certificates.queue}`] = cpuSince(new Map(), [certificates.process.pid]);
      const cpu = perRegistration(cpuBefore, cpuAfter, count);
      say(
        `  CPU per registration (ms): ${Object.entries(cpu)
          .map(([part, ms]) => `${part} ${ms.toFixed(1)}`)
          .join(', ')}`,
      );
      if (split)
        say(
          `  Redis command time per registration (µs): ${Object.entries(redisParts)
            .map(([part, us]) => `${part} ${us.toFixed(0)}`)
            .join(', ')}`,
        );
      const phases = await phaseTimes(context, ids, confirmedAt, webhookAt);
      say(
        `  the chain's own part (confirm → in the first block begun after it, p50 / p95 ms): ${percentile(rides, 50)} / ${percentile(rides, 95)}`,
      );
      say(
        `  where confirm→webhook went (p50 / p95 ms): ${Object.entries(phases)
          .map(([name, ms]) => `${name} ${ms.p50} / ${ms.p95}`)
          .join(', ')}`,
      );
      say(
        `  block intervals while the confirms were carried (ms): ${intervals.join(', ')} (asked: ${BLOCK_MS}); quotes took ${((quotedAt - started) / 1000).toFixed(1)} s`,
      );
      const sample = {
        totalMs: finished - started,
        chainMs: finished - firstConfirm,
        drainMs: finished - lastConfirm,
        quoteMs: quotedAt - started,
        confirmMs: lastConfirm - firstConfirm,
        blockIntervalMs: intervals.length ? intervals.reduce((a, b) => a + b, 0) / intervals.length : BLOCK_MS,
        p50: percentile(latencies, 50),
        p95: percentile(latencies, 95),
        rideP50: percentile(rides, 50),
        rideP95: percentile(rides, 95),
        blocks: used.blocks as number,
        extrinsics: used.extrinsics as number,
        phases,
        ids,
        cpu,
        webConfirms,
        redisParts,
        window,
        built,
        confirmsRetried: retried.count,
      };
      say(
        `  ${run === 0 ? 'first burst, processes just started (not in the medians)' : `run ${run}`}: ${count} in ${(sample.totalMs / 1000).toFixed(1)} s (last confirm at ${(sample.quoteMs / 1000).toFixed(1)} s, then ${(sample.drainMs / 1000).toFixed(1)} s), ${sample.blocks} blocks, ${sample.extrinsics} extrinsics, confirm→webhook p50 ${sample.p50} ms p95 ${sample.p95} ms, ${sample.confirmsRetried} confirms retried after a 503`,
      );
      return sample;
    });

    const call = await context.db('transactions').whereNotNull('call_hex').first('call_hex', 'network');
    const relayer = new AnchorService(context.chains).relayerAddress(call.network);
    const capacity = await chainCapacity(await context.chains.api(call.network), call.call_hex, relayer);
    const floorBlocks = Math.ceil(count / capacity.callsPerBlock);
    const floorMs = floorBlocks * BLOCK_MS;
    report.parameters.chain_capacity = capacity;
    report.parameters.chain_batch_max = services.config.chainBatchMax;
    report.parameters.floor_blocks = floorBlocks;
    report.parameters.phases_ms = samples.map((s) => s.phases);
    report.add({
      id: 'total_s',
      label: `${count} registrations, first init to last webhook`,
      unit: 's',
      runs: samples.map((s) => s.totalMs / 1000),
      floor: { label: `${floorBlocks} block(s) × ${BLOCK_MS / 1000} s`, runs: samples.map(() => floorMs / 1000) },
      target: { text: '≤ floor + 3 blocks', met: (v, floor) => v <= floor + (3 * BLOCK_MS) / 1000 },
    });
    report.add({
      id: 'registrations_per_s',
      label: 'registrations per second',
      unit: '/s',
      runs: samples.map((s) => (1000 * count) / s.totalMs),
      floor: { label: 'chain limit', runs: samples.map(() => (1000 * count) / floorMs) },
    });
    report.add({ id: 'quote_phase_s', label: 'first init to last quote', unit: 's', runs: samples.map((s) => s.quoteMs / 1000) });
    report.add({ id: 'confirm_phase_s', label: 'first confirm to last confirm', unit: 's', runs: samples.map((s) => s.confirmMs / 1000) });
    report.add({
      id: 'block_interval_ms',
      label: 'block interval while the confirms were carried (mean)',
      unit: 'ms',
      runs: samples.map((s) => Math.round(s.blockIntervalMs)),
      floor: { label: 'asked of the chain', runs: samples.map(() => BLOCK_MS) },
    });
    report.add({
      id: 'chain_phase_s',
      label: 'first confirm to last webhook',
      unit: 's',
      runs: samples.map((s) => s.chainMs / 1000),
      floor: { label: 'chain floor', runs: samples.map(() => floorMs / 1000) },
    });
    report.add({ id: 'drain_s', label: 'last confirm to last webhook', unit: 's', runs: samples.map((s) => s.drainMs / 1000) });
    report.add({
      id: 'blocks',
      label: 'blocks used',
      unit: 'blocks',
      runs: samples.map((s) => s.blocks),
      floor: { label: 'chain floor', runs: samples.map(() => floorBlocks) },
    });
    report.add({
      id: 'confirms_retried',
      label: 'confirms answered 503 and retried after Retry-After',
      unit: 'confirms',
      runs: samples.map((s) => s.confirmsRetried),
    });
    report.add({ id: 'extrinsics', label: 'relayer extrinsics used', unit: 'extrinsics', runs: samples.map((s) => s.extrinsics) });
    report.add({
      id: 'latency_p50_ms',
      label: 'confirm→webhook p50',
      unit: 'ms',
      runs: samples.map((s) => s.p50),
      floor: { label: 'one block', runs: samples.map(() => BLOCK_MS) },
    });
    report.add({
      id: 'latency_p95_ms',
      label: 'confirm→webhook p95',
      unit: 'ms',
      runs: samples.map((s) => s.p95),
      floor: { label: 'one block', runs: samples.map(() => BLOCK_MS) },
      target: { text: `≤ 2 blocks (${(2 * BLOCK_MS) / 1000} s)`, met: (v) => v <= 2 * BLOCK_MS },
    });
    report.add({
      id: 'first_burst_latency_p95_ms',
      label: "confirm→webhook p95 of the processes' first burst (the warm-up, not in the medians above)",
      unit: 'ms',
      runs: [first!.p95],
    });
    // the first burst's cost by part too, to tell which process's warm-up it is
    for (const [part, ms] of Object.entries(first!.cpu))
      report.add({
        id: `first_burst_cpu_ms_${partId(part)}`,
        label: `CPU per registration, ${part}, of the processes' first burst (the warm-up)`,
        unit: 'ms',
        runs: [ms],
      });
    for (const [at, of] of [
      ['p50', (s: (typeof samples)[number]) => s.rideP50],
      ['p95', (s: (typeof samples)[number]) => s.rideP95],
    ] as const)
      report.add({
        id: `chain_ride_${at}_ms`,
        label: `confirm → in the first block begun after it, ${at} (the chain's blocks of the run, the service taking no time)`,
        unit: 'ms',
        runs: samples.map(of),
      });
    const parts = Object.keys(samples[0]!.cpu);
    for (const part of parts) {
      report.add({
        id: `cpu_ms_${partId(part)}`,
        label: `CPU per registration: ${part}`,
        unit: 'ms',
        runs: samples.map((s) => s.cpu[part]!),
      });
    }
    report.add({
      id: 'cpu_ms_web_confirm',
      label: 'CPU per registration: web, while the confirms were answered',
      unit: 'ms',
      runs: samples.map((s) => s.webConfirms),
    });
    const redisParts = [...new Set(samples.flatMap((s) => Object.keys(s.redisParts)))].sort();
    for (const part of redisParts) {
      report.add({
        id: `redis_us_${partId(part)}`,
        label: `Redis command time per registration: ${part}`,
        unit: 'µs',
        runs: samples.map((s) => s.redisParts[part] ?? 0),
      });
    }
    addWindowFigures(report, samples, BLOCK_MS);
    report.parameters.window_blocks = samples.map((s) =>
      s.built.map((b) => ({
        number: b.number,
        interval_ms: b.intervalMs,
        build_ms: b.buildMs,
        chain_cpu_ms: Math.round(b.chainCpuMs),
        registrations: b.registrations,
        signed_before_ms: b.signedBeforeMs,
        missed_block: b.missedBlock,
      })),
    );
    if (options.redisSplit)
      report.note(
        "Redis command time: the slow log at 0 µs (--redis-split), by the first key of each command; the log's own cost is in this run's cpu_ms_redis",
      );
    report.note(
      "CPU per registration: the web, each queue's worker process, the bench database's PostgreSQL backends and the whole Redis server " +
        'make "service total"; the bench process (clients, receiver, s3rver) and the chopsticks chain (a process of its own) are counted apart, ' +
        'together under the figure that counted them when the chain ran in the bench process, and each alone',
    );
    report.note(
      "window_*: from the first confirm to the last webhook, each part's CPU read at both ends (/proc; Redis from INFO, the whole server; " +
        "PostgreSQL the bench database's backends, not the server's background processes); capacity is cores × the window; " +
        "the machine's busy time is every process's (/proc/stat), other users' work included; window_wait_s_*: the time each part's threads " +
        'were runnable but waiting for a core (/proc/<pid>/task/<tid>/schedstat), a measure of CPU contention, not of work. ' +
        'window_blocks in parameters: each block ' +
        "built in the window, its interval, its build time, the chain process's CPU since the block before, the registrations it carried, " +
        "the ms from each of its relayer extrinsics' signing (the row stored, before it is sent) to the block's building began, and the " +
        'registrations in extrinsics signed before the block before it began building (window_registrations_missed_block: they missed a block)',
    );
    report.note(
      `the chain takes ${capacity.callsPerBlock} such calls per block (bound by ${capacity.boundBy}); the service puts at most CHAIN_BATCH_MAX=${services.config.chainBatchMax} in one batch`,
    );
    report.write(options.outDir);
  } finally {
    await Promise.all(workers.map((w) => w.process.stop()));
    await web.stop();
    await receiver.stop();
    await context.close();
    await services.stop();
  }
});

/**
 * Each stretch from confirm to webhook, from the confirm's answer, the chain jobs and the transactions' steps (a
 * step's time is when it ended): until a chain job took it (its latest start, were it retried), until it had
 * recorded its first steps, until its call was in a signed batch, until that batch was in a block, until
 * finality was recorded, until the webhook arrived.
 */
async function phaseTimes(context: Resources, ids: string[], confirmedAt: Map<string, number>, webhookAt: Map<string, number>) {
  const rows = await context.db('transactions').whereIn('id', ids).select('id', 'steps');
  const taken = new Map<string, number>();
  for (const id of ids) {
    const job = await context.queues.chain.getJob(id);
    if (job?.processedOn) taken.set(id, job.processedOn);
  }
  const stretches: Record<string, number[]> = { queued: [], steps: [], batched: [], in_block: [], finalized: [], webhook: [] };
  for (const row of rows) {
    const at = (name: string) => Date.parse((row.steps as { name: string; at: string }[]).find((step) => step.name === name)!.at);
    const confirmed = confirmedAt.get(row.id)!;
    const marks = [
      confirmed,
      Math.max(confirmed, taken.get(row.id) ?? confirmed),
      at('preparing_transaction'),
      at('signing'),
      at('submitting'),
      at('confirming'),
      webhookAt.get(row.id)!,
    ];
    Object.values(stretches).forEach((list, i) => list.push(marks[i + 1]! - marks[i]!));
  }
  return Object.fromEntries(
    Object.entries(stretches).map(([name, list]) => [name, { p50: percentile(list, 50), p95: percentile(list, 95) }]),
  );
}

/** When each new block arrived, from now until `stop`, which gives the intervals between them. */
async function blockTimes(context: Resources, network: 'testnet') {
  const api = (await context.chains.api(network)) as any;
  const arrivals: number[] = [];
  const unsubscribe: () => void = await api.rpc.chain.subscribeNewHeads(() => arrivals.push(Date.now()));
  return {
    stop(): number[] {
      unsubscribe();
      return arrivals.slice(1).map((at, i) => at - arrivals[i]!);
    },
  };
}

/** init → PUT → prepare; resolves with the job id. */
async function quoteOne(base: string, token: string): Promise<string> {
  const init = await post(base, token, '/v1/works/init', initBody());
  const put = await fetch(init.upload_url, { method: 'PUT', body: randomBytes(64 * 1024) as unknown as BodyInit });
  if (put.status !== 200) throw new Error(`upload: ${put.status}`);
  await post(base, token, '/v1/works/prepare', { job_id: init.job_id });
  return init.job_id as string;
}

/** Confirms a quoted job; resolves with the transaction id and when confirm answered. */
/**
 * Confirms a quoted job; resolves with the transaction id and when confirm answered. A 503 (a dependency busy:
 * on a machine shared with other work, the web's wait for a database connection can pass its 5 s) is retried
 * after its Retry-After, as a partner would, at most three times, and counted in `retried`; the confirm's time
 * is the answer that took it.
 */
async function confirmOne(base: string, token: string, jobId: string, retried: { count: number }): Promise<[string, number]> {
  for (let attempt = 0; ; attempt++) {
    try {
      const confirm = await post(base, token, '/v1/works/confirm', { job_id: jobId }, 202);
      return [confirm.transaction_id as string, Date.now()];
    } catch (err) {
      const after = (err as { retryAfterS?: number }).retryAfterS;
      if (after === undefined || attempt === 3) throw err;
      retried.count++;
      await sleep(after * 1000);
    }
  }
}

async function post(base: string, token: string, path: string, body: unknown, status = 200): Promise<Record<string, any>> {
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, any>;
  if (res.status !== status)
    throw Object.assign(new Error(`${path}: ${res.status} ${JSON.stringify(json).slice(0, 200)}`), {
      ...(res.status === 503 ? { retryAfterS: Number(res.headers.get('retry-after') ?? 5) } : {}),
    });
  return json;
}

type Parts = Record<string, number>;

async function certificatesDone(app: Resources): Promise<number> {
  const counts = await app.queues.certificates.getJobCounts('completed', 'failed');
  return counts.completed! + counts.failed!;
}

/** Until the certificates queue has finished `total` jobs (polled: the bench process is not one of the parts measured). */
async function certificatesRendered(app: Resources, total: number): Promise<void> {
  const deadline = Date.now() + 600_000;
  while ((await certificatesDone(app)) < total) {
    if (Date.now() > deadline) throw new Error(`certificates not all rendered after 600 s (${await certificatesDone(app)} of ${total})`);
    await sleep(100);
  }
}

/**
 * CPU so far (ms) of each part: the web, each queue's worker, PostgreSQL, Redis, and what is not the service (its
 * parts named `bench…`): this process and the chain's together, as this figure counted them while the chain ran in
 * this process, and each apart.
 */
async function cpuOfParts(
  app: Resources,
  webPid: number,
  workers: readonly { queue: string; process: WorkerProcess }[],
  chainPid: number,
): Promise<{ parts: Parts; postgres: Map<number, number> }> {
  const own = process.cpuUsage();
  const chain = cpuSince(new Map(), [chainPid]);
  const parts: Parts = {
    web: cpuSince(new Map(), [webPid]),
    ...Object.fromEntries(workers.map((w) => [`worker ${w.queue}`, cpuSince(new Map(), [w.process.pid])])),
    redis: await redisCpuMs(app),
    'bench process (clients, receiver, chain)': (own.user + own.system) / 1000 + chain,
    'bench: chain node (chopsticks process)': chain,
    'bench: clients, receiver, s3rver': (own.user + own.system) / 1000,
  };
  return { parts, postgres: cpuMs(await postgresBackends(app)) };
}

function perRegistrationUs(parts: Record<string, number>, count: number): Record<string, number> {
  return Object.fromEntries(Object.entries(parts).map(([part, us]) => [part, us / count]));
}

function perRegistration(
  before: Awaited<ReturnType<typeof cpuOfParts>>,
  after: Awaited<ReturnType<typeof cpuOfParts>>,
  count: number,
): Parts {
  const out: Parts = {};
  let service = 0;
  for (const [part, ms] of Object.entries(after.parts)) {
    out[part] = (ms - before.parts[part]!) / count;
    if (!part.startsWith('bench')) service += out[part]!;
  }
  let postgres = 0;
  for (const [pid, ms] of after.postgres) postgres += ms - (before.postgres.get(pid) ?? 0);
  out.postgres = postgres / count;
  out['service total'] = service + out.postgres;
  return out;
}
