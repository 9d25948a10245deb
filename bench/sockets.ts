import path from 'node:path';
import { fork, type ChildProcess } from 'node:child_process';
import WebSocket from 'ws';
import { createLogger } from '../shared/logger';
import { openResources } from '../shared/resources';
import { startTestWorkers } from '../test/helpers/workers';
import { createOrg, createKey } from '../test/helpers/factories';
import { register } from '../test/helpers/registration';
import { benchMain, say } from './lib/main';
import { pick } from './lib/options';
import { BenchReport } from './lib/report';
import { startBenchServices } from './lib/services';
import { startWebProcess, type WebMemory } from './lib/processes';
import { repeat } from './lib/stats';

/**
 * Idle live sockets: a web process of its own (its memory is the web's alone) holds N plain WebSockets spread
 * over 10 pending transactions, each having received its `connected` frame; memory is read after a full GC
 * before and after, and the difference is reported per socket. The floor: a bare `ws` server holding the same
 * number of sockets, each sent one frame.
 */
const TRANSACTIONS = 10;
const WAVE = 250;

benchMain(async (options) => {
  const count = pick(options, options.size, 5000, 50);
  const runs = pick(options, options.runs, 3, 1);
  const report = new BenchReport('sockets', options.smoke, { sockets: count, transactions: TRANSACTIONS, runs });
  say(`sockets: ${count} idle WebSockets on ${TRANSACTIONS} transactions, ${runs} runs`);
  const services = await startBenchServices('sockets', { blocks: 'instant', env: { WS_MAX_SOCKETS_PER_ORG: String(count) } });
  Object.assign(report.versions, services.versions);
  const web = await startWebProcess(services.env, options);
  const bare = fork(path.join(__dirname, 'lib/bare-ws.ts'), [], { execArgv: ['--expose-gc', '--import', 'tsx'] });
  try {
    // pending transactions: a prepare worker for the quotes, no chain worker, so they stay where they are
    const context = openResources(services.config, createLogger('warn'), 'dev');
    const workers = await startTestWorkers(services.config, ['prepare']);
    const key = await createKey(context, await createOrg(context, 1_000_000));
    const ids: string[] = [];
    for (let i = 0; i < TRANSACTIONS; i++) ids.push((await register(web.url, key.token)).confirm.body.transaction_id);
    await workers.stop();
    await context.close();
    const wsBase = web.url.replace(/^http/, 'ws');
    const bareUrl = (await reply<{ url: string }>(bare, 'listening')).url;
    const bareMeasure = async () => {
      const answer = reply<{ memory: WebMemory }>(bare, 'memory');
      bare.send({ type: 'measure' });
      return (await answer).memory;
    };
    await openSocket(`${wsBase}/v1/ws/transactions/${ids[0]}`, key.token).then((ws) => ws.terminate()); // warm the code paths
    await openSocket(bareUrl).then((ws) => ws.terminate());

    const samples = await repeat(runs, async (run) => {
      const held = await holdSockets(
        count,
        (i) => openSocket(`${wsBase}/v1/ws/transactions/${ids[i % ids.length]}`, key.token),
        () => web.measure(),
      );
      const floor = await holdSockets(count, () => openSocket(bareUrl), bareMeasure);
      say(
        `  run ${run + 1}: web RSS ${kib(held.rss)}/socket, heap ${kib(held.heapUsed)}/socket (opened in ${held.openMs} ms); bare ws RSS ${kib(floor.rss)}/socket, heap ${kib(floor.heapUsed)}/socket`,
      );
      return { held, floor };
    });
    report.add({
      id: 'rss_per_socket_kib',
      label: 'web RSS per idle socket',
      unit: 'KiB',
      runs: samples.map((s) => s.held.rss / 1024),
      floor: { label: 'bare ws server', runs: samples.map((s) => s.floor.rss / 1024) },
      target: { text: '< 50 KB', met: (v) => v * 1024 < 50_000 },
    });
    report.add({
      id: 'heap_per_socket_kib',
      label: 'web JS heap per idle socket',
      unit: 'KiB',
      runs: samples.map((s) => s.held.heapUsed / 1024),
      floor: { label: 'bare ws server', runs: samples.map((s) => s.floor.heapUsed / 1024) },
    });
    report.add({
      id: 'external_per_socket_kib',
      label: 'web external + buffers per idle socket',
      unit: 'KiB',
      runs: samples.map((s) => s.held.external / 1024),
    });
    report.add({
      id: 'open_ms',
      label: `open ${count} sockets (each to its connected frame)`,
      unit: 'ms',
      runs: samples.map((s) => s.held.openMs),
    });
    report.write(options.outDir);
  } finally {
    bare.kill();
    await web.stop();
    await services.stop();
  }
});

/**
 * Opens `count` sockets in waves (each after its first frame), measures the server's memory before and after,
 * closes them and waits until the server has let them all go; returns the growth per socket.
 */
async function holdSockets(count: number, open: (i: number) => Promise<WebSocket>, measure: () => Promise<WebMemory>) {
  const before = await measure();
  const sockets: WebSocket[] = [];
  const started = Date.now();
  try {
    for (let opened = 0; opened < count; opened += WAVE) {
      sockets.push(...(await Promise.all(Array.from({ length: Math.min(WAVE, count - opened) }, (_, i) => open(opened + i)))));
    }
    const openMs = Date.now() - started;
    const after = await measure();
    if (after.sockets - before.sockets !== count)
      throw new Error(`the server holds ${after.sockets - before.sockets} new sockets, expected ${count}`);
    const per = (field: keyof NodeJS.MemoryUsage) => (after[field] - before[field]) / count;
    return { rss: per('rss'), heapUsed: per('heapUsed'), external: per('external'), openMs };
  } finally {
    for (const ws of sockets) ws.terminate();
    for (let i = 0; i < 100 && (await measure()).sockets > before.sockets; i++) await new Promise((r) => setTimeout(r, 50));
  }
}

/** Opens one socket and resolves once its first frame (`connected`) has arrived. */
function openSocket(url: string, token?: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: token ? { Authorization: `Bearer ${token}` } : {}, perMessageDeflate: false });
    ws.once('message', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
  });
}

function reply<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve) => {
    const onMessage = (message: { type: string }) => {
      if (message.type !== type) return;
      child.off('message', onMessage);
      resolve(message as T);
    };
    child.on('message', onMessage);
  });
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(2)} KiB`;
