import os from 'node:os';
import path from 'node:path';
import { fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger } from '../shared/logger';
import { openResources, type Resources } from '../shared/resources';
import { accessCodeAad } from '../shared/webhooks/service';
import { enqueueDeliveries } from '../shared/webhooks/enqueue';
import { createOrg, createKey, type TestKey } from '../test/helpers/factories';
import { benchMain, say } from './lib/main';
import { pick } from './lib/options';
import { BenchReport } from './lib/report';
import { startBenchServices } from './lib/services';
import { perfFlags, startWorkerProcess, type WorkerProcess } from './lib/processes';
import { repeat } from './lib/stats';
import { cpuMs, cpuSince, postgresBackends, redisCpuMs } from './lib/cpu';
import { probeKernelEntry } from './lib/kernel-entry';

/**
 * Webhook delivery throughput: N recorded `work_registered` events (each with its sealed access code, as a
 * registration without a ref records them) are enqueued at once and delivered, signed, to a local receiver
 * answering 200 (a process of its own), first by one worker process running the `webhooks` queue, then by one
 * per core (the Procfile's `worker` line scaled), as an operator adds throughput. Each run also reads the CPU
 * that the worker processes, the bench database's PostgreSQL backends, the Redis server and the receiver spent
 * per delivery (/proc, INFO): figures the machine's other load disturbs less than the rate. The floor is the
 * same number of POSTs of the same size to the same receiver, WEBHOOK_CONCURRENCY at a time over connections
 * kept alive as the workers keep them (WEBHOOK_KEEP_ALIVE_MS), from a process doing nothing else; that process's
 * CPU per POST is reported beside the worker's per delivery. One round of each, not recorded, warms both first,
 * and the processes added for the scaled run each run warm the same way. Each run ends with what the machine
 * charges for a kernel entry, directly and in the user work beside it (lib/kernel-entry.ts).
 */
benchMain(async (options) => {
  const count = pick(options, options.size, 10_000, 50);
  const runs = pick(options, options.runs, 3, 1);
  const scaled = Math.max(2, os.cpus().length);
  const services = await startBenchServices('webhooks', { blocks: 'instant' });
  const { concurrency, keepAliveMs } = services.config.webhooks;
  const report = new BenchReport('webhooks', options.smoke, {
    events: count,
    runs,
    webhook_concurrency: concurrency,
    webhook_keep_alive_ms: keepAliveMs,
    worker_processes: [1, scaled],
  });
  Object.assign(report.versions, services.versions);
  say(`webhooks: ${count} events, ${runs} runs, 1 then ${scaled} worker processes`);
  const context = openResources(services.config, createLogger('warn'), 'dev');
  const receiver = await startReceiver();
  const startWorker = () => startWorkerProcess(services.env, services.config, ['webhooks'], options);
  const worker = await startWorker();
  const flood = fork(path.join(__dirname, 'lib/post-flood.ts'), [], { execArgv: ['--import', 'tsx', ...perfFlags(options.perf)] });
  try {
    await new Promise((resolve) => flood.once('message', resolve));
    const organizationId = await createOrg(context, 1000);
    const key = await createKey(context, organizationId, undefined, receiver.url);
    const deliverAll = (workers: readonly WorkerProcess[], events = count) =>
      deliverEvents(context, receiver, workers, { organizationId, key, count: events });
    const flooded = async (body: string, posts = count) => {
      const done = new Promise<{ ms: number; cpuMs: number }>((resolve) => flood.once('message', resolve));
      flood.send({ url: receiver.url, count: posts, concurrency, body, keepAliveMs });
      const { ms, cpuMs } = await done;
      await receiver.waitFor(posts);
      return { rate: (1000 * posts) / ms, senderCpuMs: cpuMs / posts };
    };

    // warm-up, not recorded (as the other benches warm theirs): a worker runs warm in production, and its first
    // thousands of deliveries run code the JIT has not compiled yet; the floor's sender warms the same way
    const warm = await deliverAll([worker], Math.min(count, 5_000));
    await flooded(warm.lastBody, Math.min(count, 5_000));

    const samples = await repeat(runs, async (run) => {
      const one = await deliverAll([worker]);
      const more = await Promise.all(Array.from({ length: scaled - 1 }, startWorker));
      const many = await (async () => {
        // a process just started loads modules and compiles as it delivers: warmed as the first one was, not
        // recorded (docs/performance.md, section 31)
        await deliverAll([worker, ...more], Math.min(count, 5_000));
        return deliverAll([worker, ...more]);
      })().finally(() => Promise.all(more.map((w) => w.stop())));
      const { rate: floor, senderCpuMs } = await flooded(many.lastBody);
      const entry = await probeKernelEntry();
      const cpu = (s: Delivered) =>
        `CPU per delivery: worker ${s.cpuMs.worker.toFixed(2)} ms, PostgreSQL ${s.cpuMs.postgres.toFixed(2)}, Redis ${s.cpuMs.redis.toFixed(2)}, receiver ${s.cpuMs.receiver.toFixed(2)}`;
      say(
        `  run ${run + 1}: 1 worker process ${Math.round(one.rate)}/s (${cpu(one)}); ${scaled} processes ${Math.round(many.rate)}/s (${cpu(many)}); plain POSTs ${Math.round(floor)}/s (sender CPU per POST ${senderCpuMs.toFixed(3)} ms); a kernel entry ${(entry.entryNs / 1000).toFixed(2)} µs, a delivery's own computation ${(entry.workNs / 1000).toFixed(1)} µs alone, ${(entry.workAfterEntryNs / 1000).toFixed(1)} with one entry after each`,
      );
      return { one, many, floor, senderCpuMs, entry };
    });
    const floor = { label: 'plain POSTs, same concurrency', runs: samples.map((s) => s.floor) };
    report.add({
      id: 'deliveries_per_s',
      label: `${count} webhook deliveries, 1 worker process`,
      unit: '/s',
      runs: samples.map((s) => s.one.rate),
      floor,
      target: { text: '≥ 40% of plain POSTs', met: (v, f) => v >= 0.4 * f },
    });
    report.add({
      id: 'deliveries_per_s_scaled',
      label: `${count} webhook deliveries, ${scaled} worker processes`,
      unit: '/s',
      runs: samples.map((s) => s.many.rate),
      floor,
    });
    report.add({
      id: 'share_of_floor',
      label: 'deliveries / plain POSTs, 1 process',
      unit: '%',
      runs: samples.map((s) => (100 * s.one.rate) / s.floor),
      target: { text: '≥ 40%', met: (v) => v >= 40 },
    });
    const perDelivery = (part: keyof Delivered['cpuMs'], label: string) =>
      report.add({
        id: `${part}_cpu_ms`,
        label: `${label} CPU per delivery, 1 worker process`,
        unit: 'ms',
        runs: samples.map((s) => s.one.cpuMs[part]),
      });
    perDelivery('worker', 'worker');
    perDelivery('postgres', 'PostgreSQL');
    perDelivery('redis', 'Redis (whole server)');
    perDelivery('receiver', 'receiver');
    report.add({
      id: 'floor_sender_cpu_ms',
      label: "plain POSTs: the sender's CPU per POST (the floor's side of the worker's CPU per delivery)",
      unit: 'ms',
      runs: samples.map((s) => s.senderCpuMs),
    });
    // the machine's tax on kernel entries, which every POST makes (docs/performance.md, section 37)
    report.add({
      id: 'kernel_entry_us',
      label: 'this machine: one kernel entry that does no work (getppid)',
      unit: 'µs',
      runs: samples.map((s) => s.entry.entryNs / 1000),
    });
    report.add({
      id: 'delivery_work_us',
      label: "a delivery's own computation (open, serialize, sign), back to back",
      unit: 'µs',
      runs: samples.map((s) => s.entry.workNs / 1000),
    });
    report.add({
      id: 'delivery_work_after_entry_us',
      label: "the same computation with one kernel entry after each (the entry's own time, back to back, taken off)",
      unit: 'µs',
      runs: samples.map((s) => s.entry.workAfterEntryNs / 1000),
    });
    report.write(options.outDir);
  } finally {
    flood.kill();
    await worker.stop();
    await receiver.stop();
    await context.close();
    await services.stop();
  }
});

interface Receiver {
  readonly url: string;
  readonly pid: number;
  /** Resolves with the raw body of the last request once `count` more have arrived. */
  waitFor(count: number): Promise<string>;
  stop(): Promise<void>;
}

/** The receiver process (lib/receiver-process.ts). */
async function startReceiver(): Promise<Receiver> {
  const child = fork(path.join(__dirname, 'lib/receiver-process.ts'), [], { execArgv: ['--import', 'tsx'] });
  const { url } = await new Promise<{ url: string }>((resolve) => child.once('message', resolve));
  return {
    url,
    pid: child.pid!,
    waitFor: (n) =>
      new Promise((resolve) => {
        child.once('message', (m: { last: string }) => resolve(m.last));
        child.send({ waitFor: n });
      }),
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill();
      await exited;
    },
  };
}

interface Delivered {
  readonly rate: number;
  /**
   * CPU per delivery (ms) of the worker processes, of the bench database's PostgreSQL backends, of the Redis
   * server (all its clients: this bench's and any other's) and of the receiver process.
   */
  readonly cpuMs: { readonly worker: number; readonly postgres: number; readonly redis: number; readonly receiver: number };
  readonly lastBody: string;
}

/** Records `count` events, enqueues their deliveries at once (as the service does) and times them until all are delivered and recorded. */
async function deliverEvents(
  app: Resources,
  receiver: Receiver,
  workers: readonly WorkerProcess[],
  { organizationId, key, count }: { organizationId: string; key: TestKey; count: number },
): Promise<Delivered> {
  const deliveries = await recordEvents(app, organizationId, key, receiver.url, count);
  const workerPids = workers.map((w) => w.pid);
  const before = {
    worker: cpuMs(workerPids),
    receiver: cpuMs([receiver.pid]),
    postgres: cpuMs(await postgresBackends(app)),
    redis: await redisCpuMs(app),
  };
  const started = process.hrtime.bigint();
  const arrived = receiver.waitFor(count);
  // as the chain worker enqueues a block's outcomes (webhooks/enqueue.ts), 1,000 at a time
  for (let i = 0; i < deliveries.length; i += 1000)
    await enqueueDeliveries(
      app,
      deliveries.slice(i, i + 1000).map((id) => ({ id, traceparent: null })),
    );
  const lastBody = await arrived;
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  // each attempt is recorded just after its answer: the last few commit a moment after the receiver saw them
  for (let waited = 0; ; waited += 50) {
    const [row] = await app
      .db('webhook_deliveries')
      .whereIn('id', deliveries)
      .where({ status: 'delivered' })
      .count<{ count: string }[]>('* as count');
    if (Number(row!.count) === count) break;
    if (waited > 10_000) throw new Error(`${count - Number(row!.count)} deliveries not recorded as delivered`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    rate: (1000 * count) / ms,
    cpuMs: {
      worker: cpuSince(before.worker, workerPids) / count,
      postgres: cpuSince(before.postgres, await postgresBackends(app)) / count,
      redis: ((await redisCpuMs(app)) - before.redis) / count,
      receiver: cpuSince(before.receiver, [receiver.pid]) / count,
    },
    lastBody,
  };
}

/** N finalized registrations with their event and pending delivery, written in bulk; returns the delivery ids. */
async function recordEvents(app: Resources, organizationId: string, key: TestKey, url: string, count: number): Promise<string[]> {
  const { db, box } = app;
  const transactions: string[] = (
    await db.raw(
      `INSERT INTO transactions (id, organization_id, api_key_id, network, type, status, current_step, steps, anchor, price_credits, ats_id, finalized_at)
       SELECT gen_random_uuid(), ?, ?, 'testnet', 'register', 'finalized', 'completed', '[]'::jsonb, '{}'::jsonb, 0, g, now() FROM generate_series(1, ?) g
       RETURNING id`,
      [organizationId, key.id, count],
    )
  ).rows.map((r: { id: string }) => r.id);
  const events = transactions.map(() => randomUUID());
  const sealed = events.map((id) => box.seal(Buffer.from(`atc_${randomBytes(32).toString('hex')}`), accessCodeAad(id)));
  const deliveries = events.map(() => randomUUID());
  await db.raw(
    `INSERT INTO events (id, transaction_id, organization_id, api_key_id, type, payload)
     SELECT e.id, e.tx, ?, ?, 'work_registered',
       jsonb_build_object('event', 'work_registered', 'transaction_id', e.tx, 'organization_id', ?::uuid, 'api_key_id', ?::uuid,
         'external_user_ref', null, 'network', 'testnet', 'ats_id', e.n, 'tx_hash', '0x' || repeat('ab', 32), 'block_number', 1000 + e.n,
         'block_hash', '0x' || repeat('cd', 32), 'access_code', null, 'explorer_url', 'https://explorer.example/extrinsics/1-1', 'finalized_at', now())
     FROM unnest(?::uuid[], ?::uuid[]) WITH ORDINALITY AS e(id, tx, n)`,
    [organizationId, key.id, organizationId, key.id, events, transactions],
  );
  // the sealed access code on the delivery, as recordEvents keeps it
  await db.raw(
    `INSERT INTO webhook_deliveries (id, event_id, api_key_id, url, sealed_access_code)
     SELECT d, e, ?, ?, sealed FROM unnest(?::uuid[], ?::uuid[], ?::text[]) AS x(d, e, sealed)`,
    [key.id, url, deliveries, events, sealed],
  );
  return deliveries;
}
