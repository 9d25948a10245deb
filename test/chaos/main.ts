/**
 * `npm run chaos [-- --registrations N --versions N]`: 200 registrations and 100 versions driven concurrently
 * while worker processes are SIGKILLed and restarted at random, Redis is restarted once (losing everything),
 * the chain node is stopped for 20 s, the relayer's next nonce is taken from outside the service twice (the
 * pool then refuses what the service sent with it), and the webhook receiver fails half of what it gets.
 * Then it checks, from PostgreSQL, the chain and the receiver, that nothing was lost, done twice or failed
 * for a passing fault, and that no worker died but of the tool's own SIGKILLs, and prints a table.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, randomInt } from 'node:crypto';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { Keyring } from '@polkadot/keyring';
import { startTestServices, stopTestServices, configWith, testServices } from '../helpers/services';
import { call, startApp, type Reply } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { spawnWorker, type WorkerProcess } from '../helpers/workers';
import { creator, initBody, upload } from '../helpers/registration';
import { startLocalChain, type ChainHandle } from '../../shared/dev/embedded/chain';
import { startPrivateRedis, type RedisHandle } from '../../shared/dev/embedded/redis';
import { freePort } from '../../shared/dev/embedded/net';
import { relayerAddress } from '../../shared/chain/keys';
import { remarksOf, type CallLike } from '../../shared/chain/verify';
import { decodeAnchor } from '../../shared/chain/remark-payload';
import type { Env } from '../../shared/config';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const REGISTRATIONS = arg('registrations', 200);
const VERSIONS = arg('versions', 100);
const WORKERS = arg('workers', 3);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (text: string) => process.stdout.write(`[chaos ${new Date().toISOString().slice(11, 19)}] ${text}\n`);

/** Retries a request through outages (503, transport errors) until it answers something else. */
async function persist(what: string, send: () => Promise<Reply>, deadlineMs = 300_000): Promise<Reply> {
  const deadline = Date.now() + deadlineMs;
  for (let wait = 200; ; wait = Math.min(wait * 2, 3000)) {
    const reply = await send().catch((err: Error) => ({ status: 0, text: err.message }) as Reply);
    if (reply.status !== 0 && reply.status !== 503 && reply.status !== 500) return reply;
    if (Date.now() > deadline) throw new Error(`${what}: still ${reply.status} ${reply.text.slice(0, 200)}`);
    await sleep(wait);
  }
}

/** Runs fn over items, `limit` at a time. */
async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

async function main(): Promise<number> {
  await startTestServices();
  const redisPort = await freePort();
  let redis: RedisHandle = await startPrivateRedis(redisPort);
  const chainPort = await freePort();
  const relayerSeed = '//ChaosRelayer';
  const chain: ChainHandle = await startLocalChain({ endow: [await relayerAddress(relayerSeed)], blocks: 1000, port: chainPort });
  const overrides: Env = {
    REDIS_URL: redis.url,
    REDIS_PREFIX: 'chaos',
    CHAIN_TESTNET_WS: chain.wsUrl,
    RELAYER_SEED_TESTNET: relayerSeed,
    WEBHOOK_RETRY_SCHEDULE: '1,1,2,2,3,3',
    WEBHOOK_TIMEOUT_MS: '5000',
    RECONCILE_EVERY_MS: '2000',
    RECONCILE_IDLE_SECONDS: '5',
    WORKER_LOCK_MS: '3000',
    PREPARE_TIMEOUT_MS: '20000',
    RATE_LIMIT_PER_SECOND: '1000',
    RATE_LIMIT_BURST: '1000',
    LOG_LEVEL: 'warn',
  };
  const config = configWith(overrides);
  const app = await startApp(config);
  const workerEnv: Env = { ...testServices().env, ...overrides, LOG_LEVEL: 'info' };
  // every worker's log, for reading after a run: /tmp/works-api-chaos-workers.log
  const workerLog = fs.openSync(path.join(os.tmpdir(), 'works-api-chaos-workers.log'), 'w');
  /** Workers this tool stopped itself (SIGKILL mid-run, SIGTERM at the end); any other exit is a death. */
  const stoppedByUs = new Set<WorkerProcess>();
  const deaths: string[] = [];
  const spawnWatched = (): WorkerProcess => {
    const w = spawnWorker(workerEnv, [], workerLog);
    void w.exited.then(({ code, signal }) => {
      if (!stoppedByUs.has(w)) deaths.push(`pid ${w.pid}: ${signal ?? `exit ${code}`}`);
    });
    return w;
  };
  const workers: (WorkerProcess | undefined)[] = Array.from({ length: WORKERS }, spawnWatched);
  const spawned: WorkerProcess[] = [...(workers as WorkerProcess[])];

  // a receiver that fails half of what it gets
  const delivered = new Map<string, number>();
  const receiver = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c));
    req.on('end', () => {
      if (Math.random() < 0.5) return void res.writeHead(500).end();
      const id = String(req.headers['x-service-delivery']);
      delivered.set(id, (delivered.get(id) ?? 0) + 1);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const hookUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;

  const credits = 10_000_000;
  const org = await createOrg(app.context, credits);
  const key = await createKey(app.context, org, ['works:register', 'works:update', 'works:read'], hookUrl);
  const started = Date.now();
  const counts = { killed: 0, redisRestarts: 0, chainOutages: 0, outsideNonces: 0 };
  // something else using the relayer's account: its next nonce, from the chain's state (what the service may
  // have signed and sent with it is then refused or usurped in the pool), with a tip to win the slot
  const outsider = await ApiPromise.create({ provider: new WsProvider(chain.wsUrl), noInitWarn: true });
  outsider.on('error', () => undefined);
  const relayerPair = new Keyring({ type: 'sr25519' }).addFromUri(relayerSeed);
  const takeRelayerNonce = async () => {
    const account = (await outsider.query.system.account(relayerPair.address)) as unknown as { nonce: { toNumber(): number } };
    const nonce = account.nonce.toNumber();
    await outsider.tx.system
      .remark(`0x${Buffer.from('outside the service').toString('hex')}`)
      .signAndSend(relayerPair, { nonce, tip: 1_000_000_000 });
    return nonce;
  };

  // chaos, while the load runs
  let calm = false;
  const chaos = (async () => {
    let redisDone = false;
    let chainDone = false;
    let outsideDone = 0;
    while (!calm) {
      await sleep(randomInt(2000, 5000));
      if (calm) break;
      const elapsed = Date.now() - started;
      if (!redisDone && elapsed > 15_000) {
        redisDone = true;
        log('Redis: restarting, losing every key');
        await redis.stop();
        redis = await startPrivateRedis(redisPort);
        counts.redisRestarts++;
        continue;
      }
      if (!chainDone && elapsed > 35_000) {
        chainDone = true;
        log('chain: the node unreachable for 20 s');
        await chain.unreachableFor(20_000);
        counts.chainOutages++;
        log('chain: back');
        continue;
      }
      if (outsideDone < 2 && elapsed > 60_000 + outsideDone * 30_000) {
        outsideDone++;
        const nonce = await takeRelayerNonce().catch((err: Error) => (log(`outside nonce: ${err.message}`), undefined));
        if (nonce !== undefined) {
          counts.outsideNonces++;
          log(`relayer: nonce ${nonce} taken from outside the service`);
        }
        continue;
      }
      const i = randomInt(workers.length);
      const victim = workers[i];
      if (!victim) continue;
      stoppedByUs.add(victim);
      victim.kill('SIGKILL');
      await victim.exited;
      counts.killed++;
      workers[i] = undefined;
      await sleep(randomInt(300, 2000));
      workers[i] = spawnWatched();
      spawned.push(workers[i]!);
    }
  })();

  // the load: registrations, then versions of registered works as they finalize
  const confirmed: string[] = [];
  /** A session or quote lost with Redis is what a partner sees as 404: it starts over, as a partner would. */
  const lost = (e: Error) => /upload_session_not_found|prepared_not_found/.test(e.message);
  const register = async (): Promise<void> => {
    const init = await persist('init', () =>
      call(app.url, 'POST', '/v1/works/init', {
        token: key.token,
        body: initBody(),
        headers: { 'Idempotency-Key': randomBytes(8).toString('hex') },
      }),
    );
    if (init.status !== 200) throw new Error(`init: ${init.status} ${init.text}`);
    const put = await upload(init.body.upload_url, randomBytes(64 * 1024));
    if (put.status !== 200) throw new Error(`upload: ${put.status}`);
    await confirm('/v1/works', init.body.job_id).catch((e: Error) => (lost(e) ? register() : Promise.reject(e)));
  };
  const confirm = async (base: string, jobId: string) => {
    const prepare = await persist('prepare', () => call(app.url, 'POST', `${base}/prepare`, { token: key.token, body: { job_id: jobId } }));
    if (prepare.status !== 200) throw new Error(`prepare: ${prepare.status} ${prepare.text}`);
    // (a confirm answered 404 after an outage either landed before it, or lost its quote: the count tells)
    const reply = await persist('confirm', () => call(app.url, 'POST', `${base}/confirm`, { token: key.token, body: { job_id: jobId } }));
    if (reply.status === 202) confirmed.push(reply.body.transaction_id);
    else if (reply.status !== 404) throw new Error(`confirm: ${reply.status} ${reply.text}`); // 404: a retried confirm that had landed
  };
  const errors: string[] = [];
  const load = (async () => {
    await pool(
      Array.from({ length: REGISTRATIONS }, (_, i) => i),
      16,
      () => register().catch((e: Error) => void errors.push(e.message)),
    );
    log(`${REGISTRATIONS} registrations confirmed; versions next`);
    const addVersion = async (): Promise<void> => {
      let works: string[] = [];
      while (!(works = await app.context.db('works').where({ organization_id: org }).pluck('ats_id')).length) await sleep(500);
      const atsId = works[randomInt(works.length)];
      const init = await persist('version init', () =>
        call(app.url, 'POST', `/v1/works/${atsId}/versions/init`, {
          token: key.token,
          body: { network: 'testnet', creators: [creator({ full_name: `V ${randomInt(1e6)}` })] },
        }),
      );
      if (init.status !== 200) throw new Error(`version init: ${init.status} ${init.text}`);
      await confirm(`/v1/works/${atsId}/versions`, init.body.job_id).catch((e: Error) => (lost(e) ? addVersion() : Promise.reject(e)));
    };
    await pool(
      Array.from({ length: VERSIONS }, (_, i) => i),
      8,
      () => addVersion().catch((e: Error) => void errors.push(e.message)),
    );
  })();
  await load;
  calm = true;
  await chaos;
  log(
    `load done in ${Math.round((Date.now() - started) / 1000)} s; chaos stopped (${counts.killed} workers killed, ${counts.redisRestarts} Redis restart, ${counts.chainOutages} chain outage, ${counts.outsideNonces} relayer nonces taken from outside); settling`,
  );
  for (let i = 0; i < workers.length; i++) if (!workers[i]) spawned.push((workers[i] = spawnWatched()));

  // settle: every transaction terminal, every delivery delivered or dead
  const settleDeadline = Date.now() + 600_000;
  for (;;) {
    const open = await app.context
      .db('transactions')
      .where({ organization_id: org })
      .whereIn('status', ['pending', 'submitted', 'in_block'])
      .count<{ count: string }[]>('* as n');
    const pending = await app.context
      .db('webhook_deliveries as d')
      .join('events as e', 'e.id', 'd.event_id')
      .where('e.organization_id', org)
      .where('d.status', 'pending')
      .count<{ count: string }[]>('* as n');
    const n = Number((open[0] as unknown as { n: string }).n) + Number((pending[0] as unknown as { n: string }).n);
    if (n === 0) break;
    if (Date.now() > settleDeadline) {
      log(`not settled: ${n} open`);
      break;
    }
    await sleep(1000);
  }

  // the checks
  const db = app.context.db;
  const txs = await db('transactions')
    .where({ organization_id: org })
    .select('id', 'status', 'type', 'ats_id', 'version', 'work_id', 'result');
  const reasons = new Map<string, number>();
  for (const t of txs.filter((x) => x.status === 'failed')) {
    const key = `${t.result?.error?.code}: ${String(t.result?.error?.message).slice(0, 120)}`;
    reasons.set(key, (reasons.get(key) ?? 0) + 1);
  }
  for (const [reason, n] of reasons) log(`failed ×${n}: ${reason}`);
  const ledger = await db('credit_ledger').where({ organization_id: org }).select('kind', 'amount', 'reference');
  const byRef = new Map<string, { debit: number; refund: number; charged: number }>();
  for (const e of ledger) {
    if (!e.reference) continue;
    const r = byRef.get(e.reference) ?? { debit: 0, refund: 0, charged: 0 };
    if (e.kind === 'debit') r.debit++;
    if (e.kind === 'refund') r.refund++;
    r.charged += Number(e.amount);
    byRef.set(e.reference, r);
  }
  const finalized = txs.filter((t) => t.status === 'finalized');
  const failed = txs.filter((t) => t.status === 'failed');
  const exactlyOnce = txs.every((t) => {
    const r = byRef.get(t.id);
    if (!r) return false;
    return t.status === 'finalized'
      ? r.debit === 1 && r.refund === 0
      : t.status === 'failed'
        ? r.debit === 1 && r.refund === 1 && r.charged === 0
        : false;
  });
  const orgRow = await db('organizations').where({ id: org }).first();
  const sum = ledger.reduce((s, e) => s + Number(e.amount), 0);
  const charges = ledger.filter((e) => e.kind === 'debit').reduce((s, e) => s + Number(e.amount), 0);
  const refunds = ledger.filter((e) => e.kind === 'refund').reduce((s, e) => s + Number(e.amount), 0);
  const grants = ledger.filter((e) => e.kind !== 'debit' && e.kind !== 'refund').reduce((s, e) => s + Number(e.amount), 0);
  const ledgerOk = Number(orgRow.credit_balance) === sum && sum === grants + charges + refunds && grants === credits;

  const api = await ApiPromise.create({ provider: new WsProvider(chain.wsUrl), noInitWarn: true });
  const best = (await api.rpc.chain.getHeader()).number.toNumber();
  const anchors = new Map<string, number>();
  for (let n = 1; n <= best; n++) {
    const block = await api.rpc.chain.getBlock(await api.rpc.chain.getBlockHash(n));
    for (const x of block.block.extrinsics) {
      for (const bytes of remarksOf(x.method as unknown as CallLike)) {
        try {
          const a = decodeAnchor(bytes);
          const k = `${a.atsId}/${a.version}`;
          anchors.set(k, (anchors.get(k) ?? 0) + 1);
        } catch {
          // not an anchor
        }
      }
    }
  }
  await api.disconnect();
  const versions = await db('work_versions as v')
    .join('works as w', 'w.id', 'v.work_id')
    .where('w.organization_id', org)
    .select('w.ats_id', 'v.version');
  const indexed = new Set(versions.map((v) => `${v.ats_id}/${v.version}`));
  const chainOk =
    versions.length === finalized.length &&
    [...indexed].every((k) => anchors.get(k) === 1) &&
    [...anchors.keys()].every((k) => indexed.has(k)) &&
    indexed.size === versions.length;

  const deliveries = await db('webhook_deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .where('e.organization_id', org)
    .select('d.id', 'd.status');
  const events = await db('events').where({ organization_id: org }).count<{ n: string }[]>('* as n');
  const deliveredRows = deliveries.filter((d) => d.status === 'delivered');
  const deadRows = deliveries.filter((d) => d.status === 'dead');
  const eventsOk =
    Number((events[0] as unknown as { n: string }).n) === finalized.length + failed.length &&
    deliveries.length === Number((events[0] as unknown as { n: string }).n) &&
    deliveredRows.length + deadRows.length === deliveries.length &&
    deliveredRows.every((d) => (delivered.get(d.id) ?? 0) >= 1);

  // shut down, then look for leftovers
  await outsider.disconnect();
  await Promise.all(
    workers.map(async (w) => {
      if (!w) return;
      stoppedByUs.add(w);
      w.kill('SIGTERM');
      await w.exited;
    }),
  );
  receiver.close();
  await app.close();
  await chain.stop();
  await redis.stop();
  await stopTestServices();
  const alive = spawned.filter((w) => {
    try {
      process.kill(w.pid, 0);
      return true;
    } catch {
      return false;
    }
  });

  const rows: [string, boolean, string][] = [
    [
      'load driven',
      errors.length === 0,
      `${confirmed.length} confirmed (${REGISTRATIONS} registrations, ${VERSIONS} versions asked)${errors.length ? `; ${errors.length} driver errors: ${errors[0]}` : ''}`,
    ],
    [
      'every confirmed transaction finalized or failed',
      txs.every((t) => t.status === 'finalized' || t.status === 'failed') && confirmed.every((id) => txs.some((t) => t.id === id)),
      `${finalized.length} finalized, ${failed.length} failed, ${txs.length - finalized.length - failed.length} open`,
    ],
    ['nothing failed for a passing fault', failed.length === 0, `${failed.length} failed`],
    ['charged exactly once, refunded exactly once', exactlyOnce, 'one debit each; failed ones one refund of the same amount'],
    ['ledger sum = granted − charges + refunds', ledgerOk, `balance ${orgRow.credit_balance} = ${grants} ${charges} + ${refunds}`],
    [
      'every work on chain once in the index',
      chainOk,
      `${versions.length} indexed versions, ${anchors.size} anchors on chain (${best} blocks)${
        chainOk
          ? ''
          : `; anchored twice: ${
              [...anchors]
                .filter(([, n]) => n > 1)
                .map(([k]) => k)
                .join(' ') || 'none'
            }; indexed, not anchored once: ${[...indexed].filter((k) => anchors.get(k) !== 1).join(' ') || 'none'}; anchored, not indexed: ${[...anchors.keys()].filter((k) => !indexed.has(k)).join(' ') || 'none'}`
      }`,
    ],
    [
      'every event delivered or dead-lettered',
      eventsOk,
      `${deliveredRows.length} delivered, ${deadRows.length} dead of ${deliveries.length} events`,
    ],
    [
      "no worker died but of the tool's SIGKILL",
      deaths.length === 0,
      deaths.length ? deaths.join('; ') : `${spawned.length - counts.killed} ended by SIGTERM, ${counts.killed} by SIGKILL`,
    ],
    ['no process leaked', alive.length === 0, `${spawned.length} worker processes started, ${alive.length} alive`],
  ];
  process.stdout.write(`\n| check | result | detail |\n|---|---|---|\n`);
  for (const [name, ok, detail] of rows) process.stdout.write(`| ${name} | ${ok ? 'PASS' : 'FAIL'} | ${detail} |\n`);
  process.stdout.write(
    `\nchaos: ${counts.killed} worker SIGKILLs, ${counts.redisRestarts} Redis restart (data lost), ${counts.chainOutages} chain outage of 20 s, ${counts.outsideNonces} relayer nonces taken from outside, receiver failing half; ${Math.round((Date.now() - started) / 1000)} s in all\n`,
  );
  return rows.every(([, ok]) => ok) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`chaos failed: ${(err as Error).stack}\n`);
    process.exit(1);
  },
);
