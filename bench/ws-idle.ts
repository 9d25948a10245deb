import { fork, type ChildProcess } from 'node:child_process';
import WebSocket from 'ws';
import { loadConfig } from '../shared/config';
import { createLogger } from '../shared/logger';
import { createContext, closeContext } from '../shared/context';
import { startWeb } from '../web/main';
import { startTestServices, stopTestServices } from '../test/helpers/services';
import { startTestWorkers } from '../test/helpers/workers';
import { createOrg, createKey } from '../test/helpers/factories';
import { register } from '../test/helpers/registration';

/**
 * Idle live sockets (not a test): a real web process (`startWeb`, in a child process of its own so its
 * memory is the web's alone) holds BENCH_SOCKETS (5,000) plain WebSockets spread over BENCH_TRANSACTIONS
 * pending transactions, each having received its `connected` frame; memory is read after a full GC before
 * and after, and the difference is reported per socket. Dependencies are the test harness's embedded ones.
 */
const SOCKETS = Number(process.env.BENCH_SOCKETS ?? 5000);
const TRANSACTIONS = Number(process.env.BENCH_TRANSACTIONS ?? 10);
const WAVE = 250;

type Memory = NodeJS.MemoryUsage & { sockets: number };

const role = process.env.BENCH_ROLE === 'web' ? webRole : main;
role().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});

/** The child: the web process as `npm run web` starts it, answering memory readings over IPC. */
async function webRole(): Promise<void> {
  const config = loadConfig(process.env);
  const web = await startWeb(config, createLogger(config.log.level));
  process.on('message', async (message: { type: string }) => {
    if (message.type === 'measure') {
      for (let i = 0; i < 3; i++) global.gc?.();
      process.send!({ type: 'memory', memory: { ...process.memoryUsage(), sockets: web.live.connections.size } });
    } else if (message.type === 'stop') {
      await web.stop();
      process.exit(0);
    }
  });
  process.send!({ type: 'listening', url: web.url });
}

function reply<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: { type: string } & Record<string, unknown>) => {
      if (message.type !== type) return;
      child.off('message', onMessage);
      resolve(message as T);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`web process exited (${code})`)));
  });
}

async function measure(web: ChildProcess): Promise<Memory> {
  const answer = reply<{ memory: Memory }>(web, 'memory');
  web.send({ type: 'measure' });
  return (await answer).memory;
}

/** Opens one socket and resolves once its `connected` frame has arrived. */
function openSocket(url: string, token: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${token}` }, perMessageDeflate: false });
    ws.once('message', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
  });
}

async function main(): Promise<void> {
  const log = (line: string) => process.stdout.write(`${line}\n`);
  log(`starting embedded dependencies…`);
  const services = await startTestServices();
  const sockets: WebSocket[] = [];
  let web: ChildProcess | undefined;
  try {
    web = fork(__filename, [], {
      execArgv: ['--expose-gc', '--import', 'tsx'],
      env: { PATH: process.env.PATH, ...services.env, BENCH_ROLE: 'web', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', WS_MAX_SOCKETS_PER_ORG: String(SOCKETS) },
    });
    const { url } = await reply<{ url: string }>(web, 'listening');

    // pending transactions: a prepare worker for the quotes, no chain worker, so they stay where they are
    const context = createContext(services.config, createLogger('warn'), 'worker');
    const workers = await startTestWorkers(services.config, ['prepare']);
    const key = await createKey(context, await createOrg(context, 1_000_000));
    const ids: string[] = [];
    for (let i = 0; i < TRANSACTIONS; i++) ids.push((await register(url, key.token)).confirm.body.transaction_id);
    await workers.stop();
    await closeContext(context);

    const wsBase = url.replace(/^http/, 'ws');
    await openSocket(`${wsBase}/v1/ws/transactions/${ids[0]}`, key.token).then((ws) => ws.terminate()); // warm the code paths
    const before = await measure(web);
    const started = Date.now();
    for (let opened = 0; opened < SOCKETS; opened += WAVE) {
      const wave = Array.from({ length: Math.min(WAVE, SOCKETS - opened) }, (_, i) => openSocket(`${wsBase}/v1/ws/transactions/${ids[(opened + i) % ids.length]}`, key.token));
      sockets.push(...(await Promise.all(wave)));
    }
    const openMs = Date.now() - started;
    const after = await measure(web);
    if (after.sockets !== SOCKETS) throw new Error(`the web holds ${after.sockets} sockets, expected ${SOCKETS}`);

    const per = (field: keyof NodeJS.MemoryUsage) => (after[field] - before[field]) / SOCKETS;
    const kb = (bytes: number) => `${(bytes / 1024).toFixed(2)} KiB`;
    const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
    log(`${SOCKETS} idle sockets on ${TRANSACTIONS} transactions, opened in ${openMs} ms (each after its connected frame)`);
    log(`web process RSS        ${mb(before.rss)} -> ${mb(after.rss)}   per socket ${kb(per('rss'))}`);
    log(`JS heap used           ${mb(before.heapUsed)} -> ${mb(after.heapUsed)}   per socket ${kb(per('heapUsed'))}`);
    log(`external + buffers     ${mb(before.external)} -> ${mb(after.external)}   per socket ${kb(per('external'))}`);
  } finally {
    for (const ws of sockets) ws.terminate();
    if (web && web.exitCode === null) {
      const exited = new Promise((resolve) => web!.once('exit', resolve));
      web.send({ type: 'stop' });
      await exited;
    }
    await stopTestServices();
  }
  process.exit(0);
}
