import path from 'node:path';
import { fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger } from '../shared/logger';
import { createContext, closeContext, type AppContext } from '../shared/context';
import { accessCodeAad } from '../shared/webhooks/service';
import { deliveryJobOptions } from '../shared/webhooks/enqueue';
import { createOrg, createKey, type TestKey } from '../test/helpers/factories';
import { WebhookReceiver } from '../test/helpers/receiver';
import { benchMain, say } from './lib/main';
import { pick } from './lib/options';
import { BenchReport } from './lib/report';
import { startBenchServices } from './lib/services';
import { startWorkerProcess } from './lib/processes';
import { repeat } from './lib/stats';

/**
 * Webhook delivery throughput: N recorded `work_registered` events (each with its sealed access code, as a
 * registration without a ref records them) are enqueued at once, and one worker process running the
 * `webhooks` queue (WEBHOOK_CONCURRENCY 32) delivers them, signed, to a local receiver answering 200. The
 * floor is the same number of POSTs of the same size to the same receiver, 32 at a time over fresh
 * connections, from a process doing nothing else.
 */
benchMain(async (options) => {
  const count = pick(options, options.size, 10_000, 50);
  const runs = pick(options, options.runs, 3, 1);
  const services = await startBenchServices('webhooks', { blocks: 'instant' });
  const concurrency = services.config.webhooks.concurrency;
  const report = new BenchReport('webhooks', options.smoke, { events: count, runs, webhook_concurrency: concurrency, worker_processes: 1 });
  Object.assign(report.versions, services.versions);
  say(`webhooks: ${count} events, ${runs} runs`);
  const context = createContext(services.config, createLogger('warn'), 'worker');
  const receiver = await new WebhookReceiver().start();
  const worker = await startWorkerProcess(services.env, services.config, ['webhooks'], { profileDir: options.profileDir });
  const flood = fork(path.join(__dirname, 'lib/post-flood.ts'), [], { execArgv: ['--import', 'tsx'] });
  try {
    await new Promise((resolve) => flood.once('message', resolve));
    const organizationId = await createOrg(context, 1000);
    const key = await createKey(context, organizationId, undefined, receiver.url);

    const samples = await repeat(runs, async (run) => {
      const deliveries = await recordEvents(context, organizationId, key, receiver.url, count);
      const expected = receiver.received.length + count;
      const started = process.hrtime.bigint();
      for (let i = 0; i < deliveries.length; i += 1000) {
        await context.queues.webhooks.addBulk(deliveries.slice(i, i + 1000).map((id) => ({ name: 'deliver', data: { deliveryId: id }, opts: deliveryJobOptions(context.config.webhooks, id) })));
      }
      const last = await receiver.waitFor(expected, 600_000);
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      // each attempt is recorded just after its answer: the last few commit a moment after the receiver saw them
      for (let waited = 0; ; waited += 50) {
        const [row] = await context.db('webhook_deliveries').whereIn('id', deliveries).where({ status: 'delivered' }).count<{ count: string }[]>('* as count');
        if (Number(row!.count) === count) break;
        if (waited > 10_000) throw new Error(`${count - Number(row!.count)} deliveries not recorded as delivered`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const body = last[last.length - 1]!.raw;
      const floorMs = await new Promise<number>((resolve) => {
        flood.once('message', (m: { ms: number }) => resolve(m.ms));
        flood.send({ url: receiver.url, count, concurrency, body });
      });
      say(`  run ${run + 1}: ${count} deliveries in ${(ms / 1000).toFixed(2)} s (${Math.round((1000 * count) / ms)}/s); plain POSTs ${Math.round((1000 * count) / floorMs)}/s`);
      return { rate: (1000 * count) / ms, floor: (1000 * count) / floorMs };
    });
    report.add({
      id: 'deliveries_per_s',
      label: `${count} webhook deliveries`,
      unit: '/s',
      runs: samples.map((s) => s.rate),
      floor: { label: 'plain POSTs, same concurrency', runs: samples.map((s) => s.floor) },
      target: { text: '≥ 1,500/s', met: (v) => v >= 1500 },
    });
    report.add({ id: 'share_of_floor', label: 'deliveries / plain POSTs', unit: '%', runs: samples.map((s) => (100 * s.rate) / s.floor) });
    report.write(options.outDir);
  } finally {
    flood.kill();
    await worker.stop();
    await receiver.stop();
    await closeContext(context);
    await services.stop();
  }
});

/** N finalized registrations with their event and pending delivery, written in bulk; returns the delivery ids. */
async function recordEvents(app: AppContext, organizationId: string, key: TestKey, url: string, count: number): Promise<string[]> {
  const { db, box } = app;
  const transactions: string[] = (
    await db.raw(
      `INSERT INTO transactions (id, organization_id, api_key_id, network, type, status, current_step, steps, quote, price_credits, ats_id, finalized_at)
       SELECT gen_random_uuid(), ?, ?, 'testnet', 'register', 'finalized', 'completed', '[]'::jsonb, '{}'::jsonb, 0, g, now() FROM generate_series(1, ?) g
       RETURNING id`,
      [organizationId, key.id, count],
    )
  ).rows.map((r: { id: string }) => r.id);
  const events = transactions.map(() => randomUUID());
  const sealed = events.map((id) => box.seal(Buffer.from(`atc_${randomBytes(32).toString('hex')}`), accessCodeAad(id)));
  const deliveries = events.map(() => randomUUID());
  await db.raw(
    `INSERT INTO events (id, transaction_id, organization_id, api_key_id, type, payload, sealed_access_code)
     SELECT e.id, e.tx, ?, ?, 'work_registered',
       jsonb_build_object('event', 'work_registered', 'transaction_id', e.tx, 'organization_id', ?::uuid, 'api_key_id', ?::uuid,
         'external_user_ref', null, 'network', 'testnet', 'ats_id', e.n, 'tx_hash', '0x' || repeat('ab', 32), 'block_number', 1000 + e.n,
         'block_hash', '0x' || repeat('cd', 32), 'access_code', null, 'explorer_url', 'https://explorer.example/extrinsics/1-1', 'finalized_at', now()),
       e.sealed
     FROM unnest(?::uuid[], ?::uuid[], ?::text[]) WITH ORDINALITY AS e(id, tx, sealed, n)`,
    [organizationId, key.id, organizationId, key.id, events, transactions, sealed],
  );
  await db.raw(`INSERT INTO webhook_deliveries (id, event_id, api_key_id, url) SELECT d, e, ?, ? FROM unnest(?::uuid[], ?::uuid[]) AS x(d, e)`, [key.id, url, deliveries, events]);
  return deliveries;
}
