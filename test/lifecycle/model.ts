import { randomBytes, randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { call, startApp, type Reply, type TestApp } from '../helpers/app';
import { configWith } from '../helpers/services';
import { createKey, createOrg, type TestKey } from '../helpers/factories';
import { creator, initBody, settled, upload } from '../helpers/registration';
import { decodeAnchor } from '../../shared/chain/remark-payload';
import { remarksOf, type CallLike } from '../../shared/chain/verify';

/**
 * A model-based test of the job lifecycle (docs/api.md#job-states) against the real stack: fast-check draws sequences
 * of init, PUT (once, twice, to another key), prepare, confirm, re-prepare, idempotent replays, expiry of
 * short-lived sessions, versions of the works created, some sent concurrently; each command checks its
 * answers against the model, and after every sequence the money and the chain are checked (see `invariants`).
 */
export interface LifecycleTarget {
  readonly app: TestApp;
  /** The same stack with UPLOAD_TTL_SECONDS short, for expiry. */
  readonly shortApp: TestApp;
  readonly shortTtlSeconds: number;
  readonly chain: ApiPromise;
}

interface JobModel {
  readonly id: string;
  /** Made through the web with short upload sessions. */
  readonly short: boolean;
  readonly kind: 'register' | 'add_version';
  readonly atsId?: number;
  readonly uploadUrl?: string;
  readonly uploadExpiresAt: number;
  readonly init: { path: string; body: unknown; idem: string; text: string; base: string };
  uploaded: boolean;
  prepared: boolean;
  confirmed: boolean;
}

interface Model {
  readonly jobs: JobModel[];
  /** ats_ids of finalized registrations, known after a settle. */
  readonly works: number[];
}

interface Real {
  readonly t: LifecycleTarget;
  readonly org: string;
  readonly key: TestKey;
  /** Every status answered, for "no 5xx". */
  readonly statuses: number[];
}

type Cmd = fc.AsyncCommand<Model, Real>;

const fail = (message: string): never => {
  throw new Error(message);
};

async function send(r: Real, base: string, method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply> {
  const reply = await call(base, method, path, { token: r.key.token, body, headers });
  r.statuses.push(reply.status);
  if (reply.status >= 500) fail(`${method} ${path} → ${reply.status} ${reply.text}`);
  return reply;
}

function expectStatus(reply: Reply, status: number, code?: string, what = ''): void {
  const got = (reply.body as { error?: { code: string } } | undefined)?.error?.code;
  if (reply.status !== status || (code && got !== code))
    fail(`${what}: expected ${status} ${code ?? ''}, got ${reply.status} ${reply.text.slice(0, 200)}`);
}

const prefixOf = (job: JobModel) => (job.kind === 'register' ? '/v1/works' : `/v1/works/${job.atsId}/versions`);
/** A short-lived job's session is surely alive, surely over, or too close to its expiry to tell. */
function session(job: JobModel): 'alive' | 'over' | 'unsure' {
  const left = job.uploadExpiresAt - Date.now();
  return left > 1500 ? 'alive' : left < -1500 ? 'over' : 'unsure';
}

class Init implements Cmd {
  constructor(
    readonly short: boolean,
    readonly version: { work: number; upload: boolean } | null,
  ) {}
  check = (m: Readonly<Model>) => !this.version || m.works.length > 0;
  async run(m: Model, r: Real) {
    const base = this.short ? r.t.shortApp.url : r.t.app.url;
    const atsId = this.version ? m.works[this.version.work % m.works.length] : undefined;
    const path = this.version ? `/v1/works/${atsId}/versions/${this.version.upload ? 'init-upload' : 'init'}` : '/v1/works/init';
    const body = this.version
      ? {
          network: 'testnet',
          creators: [creator({ full_name: `V ${randomUUID().slice(0, 6)}` })],
          ...(this.version.upload ? { filename: 'v.wav' } : {}),
        }
      : initBody({ title: `Model ${randomUUID().slice(0, 8)}` });
    const idem = randomUUID();
    const reply = await send(r, base, 'POST', path, body, { 'Idempotency-Key': idem });
    expectStatus(reply, 200, undefined, 'init');
    const b = reply.body as { job_id: string; upload_url?: string; upload_expires_at?: string };
    const ttl = this.short ? r.t.shortTtlSeconds : 600;
    m.jobs.push({
      id: b.job_id,
      short: this.short,
      kind: this.version ? 'add_version' : 'register',
      atsId,
      uploadUrl: b.upload_url,
      uploadExpiresAt: b.upload_expires_at ? Date.parse(b.upload_expires_at) : Date.now() + ttl * 1000,
      init: { path, body, idem, text: reply.text, base },
      uploaded: !b.upload_url, // a metadata-only version reuses anchored audio
      prepared: false,
      confirmed: false,
    });
  }
  toString = () =>
    `init(${this.short ? 'short' : 'normal'}${this.version ? `, version of work #${this.version.work}${this.version.upload ? ' with audio' : ''}` : ''})`;
}

class ReplayInit implements Cmd {
  constructor(readonly job: number) {}
  check = (m: Readonly<Model>) => m.jobs.length > 0;
  async run(m: Model, r: Real) {
    const job = m.jobs[this.job % m.jobs.length]!;
    const reply = await send(r, job.init.base, 'POST', job.init.path, job.init.body, { 'Idempotency-Key': job.init.idem });
    if (reply.status !== 200 || reply.text !== job.init.text) fail(`replayed init: not the first answer byte for byte (${reply.status})`);
  }
  toString = () => `replayInit(#${this.job})`;
}

class Put implements Cmd {
  constructor(
    readonly job: number,
    readonly mode: 'first' | 'again' | 'elsewhere',
  ) {}
  check = (m: Readonly<Model>) => m.jobs.some((j) => j.uploadUrl);
  async run(m: Model, r: Real) {
    const jobs = m.jobs.filter((j) => j.uploadUrl);
    const job = jobs[this.job % jobs.length]!;
    let url = job.uploadUrl!;
    if (this.mode === 'elsewhere') {
      const u = new URL(url);
      u.pathname = u.pathname.replace(/[^/]+$/, randomUUID());
      url = u.toString();
    }
    const state = session(job);
    const res = await upload(url, randomBytes(2048 + (this.job % 7) * 512));
    r.statuses.push(res.status);
    const expired = state === 'over' || (state === 'unsure' && res.status === 403);
    if (this.mode === 'elsewhere') {
      if (res.status !== 403) fail(`PUT to another key: ${res.status}`);
    } else if (expired) {
      if (res.status !== 403) fail(`PUT after expiry: ${res.status}`);
    } else if (job.uploaded) {
      if (res.status !== 412) fail(`second PUT: ${res.status}`);
    } else {
      if (res.status !== 200) fail(`first PUT: ${res.status}`);
      job.uploaded = true;
    }
  }
  toString = () => `put(#${this.job}, ${this.mode})`;
}

class Prepare implements Cmd {
  constructor(
    readonly job: number,
    readonly concurrent: number,
  ) {}
  check = (m: Readonly<Model>) => m.jobs.length > 0;
  async run(m: Model, r: Real) {
    const job = m.jobs[this.job % m.jobs.length]!;
    const state = session(job);
    const replies = await Promise.all(
      Array.from({ length: this.concurrent }, () => send(r, r.t.app.url, 'POST', `${prefixOf(job)}/prepare`, { job_id: job.id })),
    );
    for (const reply of replies) {
      if (job.confirmed || state === 'over')
        expectStatus(reply, 404, 'registration.upload_session_not_found', `prepare of a ${job.confirmed ? 'confirmed' : 'lapsed'} job`);
      else if (state === 'unsure' && reply.status === 404) continue;
      else if (!job.uploaded) expectStatus(reply, 422, 'registration.audio_missing', 'prepare before upload');
      else expectStatus(reply, 200, undefined, 'prepare');
    }
    const ok = replies.filter((x) => x.status === 200);
    if (new Set(ok.map((x) => x.text)).size > 1) fail('concurrent prepares answered different quotes');
    if (ok.length) job.prepared = true;
  }
  toString = () => `prepare(#${this.job}${this.concurrent > 1 ? ` ×${this.concurrent} at once` : ''})`;
}

class Confirm implements Cmd {
  constructor(
    readonly job: number,
    readonly concurrent: number,
  ) {}
  check = (m: Readonly<Model>) => m.jobs.length > 0;
  async run(m: Model, r: Real) {
    const job = m.jobs[this.job % m.jobs.length]!;
    const replies = await Promise.all(
      Array.from({ length: this.concurrent }, () => send(r, r.t.app.url, 'POST', `${prefixOf(job)}/confirm`, { job_id: job.id })),
    );
    const accepted = replies.filter((x) => x.status === 202).length;
    for (const reply of replies) if (reply.status !== 202) expectStatus(reply, 404, 'registration.prepared_not_found', 'confirm');
    // a prepared quote lives 300 s, past any upload session: it stays confirmable once
    const expected = job.prepared && !job.confirmed ? 1 : 0;
    if (accepted !== expected) fail(`confirm: ${accepted} accepted, ${expected} expected`);
    if (accepted) job.confirmed = true;
  }
  toString = () => `confirm(#${this.job}${this.concurrent > 1 ? ` ×${this.concurrent} at once` : ''})`;
}

/** Prepare and confirm of one job at the same moment: either order is allowed; PostgreSQL says which won. */
class PrepareConfirmRace implements Cmd {
  constructor(readonly job: number) {}
  check = (m: Readonly<Model>) => m.jobs.length > 0;
  async run(m: Model, r: Real) {
    const job = m.jobs[this.job % m.jobs.length]!;
    const [p, c] = await Promise.all([
      send(r, r.t.app.url, 'POST', `${prefixOf(job)}/prepare`, { job_id: job.id }),
      send(r, r.t.app.url, 'POST', `${prefixOf(job)}/confirm`, { job_id: job.id }),
    ]);
    if (![200, 404, 422].includes(p.status)) fail(`raced prepare: ${p.status}`);
    if (![202, 404].includes(c.status)) fail(`raced confirm: ${c.status}`);
    if (c.status === 202 && (job.confirmed || !job.prepared) && p.status !== 200) fail('a confirm was accepted for a job with no quote');
    if (p.status === 200) job.prepared = true;
    if (c.status === 202) {
      if (job.confirmed) fail('a second confirm was accepted');
      job.confirmed = true;
    }
  }
  toString = () => `race(prepare, confirm of #${this.job})`;
}

class Lapse implements Cmd {
  constructor(readonly job: number) {}
  check = (m: Readonly<Model>) => m.jobs.some((j) => j.short);
  async run(m: Model) {
    const short = m.jobs.filter((j) => j.short);
    const job = short[this.job % short.length]!;
    // the clock passes the session's expiry (time-driven, not a delay tuned to this machine)
    while (session(job) !== 'over')
      await new Promise((resolve) => setTimeout(resolve, Math.max(50, job.uploadExpiresAt + 1600 - Date.now())));
  }
  toString = () => `lapse(short #${this.job})`;
}

/** Waits for every confirmed transaction to end; finalized registrations become works for versions. */
class Settle implements Cmd {
  check = () => true;
  async run(m: Model, r: Real) {
    for (const tx of await settleAll(r)) {
      if (tx.type === 'register' && tx.status === 'finalized' && !m.works.includes(Number(tx.ats_id))) m.works.push(Number(tx.ats_id));
    }
  }
  toString = () => 'settle';
}

async function settleAll(r: Real) {
  const db = r.t.app.context.db;
  const ids: string[] = await db('transactions').where({ organization_id: r.org }).pluck('id');
  return Promise.all(ids.map((id) => settled(r.t.app.context, id, 180_000)));
}

export const lifecycleCommands = (): fc.Arbitrary<Iterable<Cmd>> => {
  const job = fc.nat({ max: 20 });
  const init = fc.boolean().map((short) => new Init(short, null));
  return fc.commands(
    [
      init,
      init,
      fc.tuple(fc.nat({ max: 5 }), fc.boolean()).map(([work, withAudio]) => new Init(false, { work, upload: withAudio })),
      job.map((j) => new ReplayInit(j)),
      fc
        .tuple(job, fc.constantFrom('first' as const, 'first' as const, 'again' as const, 'elsewhere' as const))
        .map(([j, mode]) => new Put(j, mode)),
      fc.tuple(job, fc.constantFrom('first' as const)).map(([j, mode]) => new Put(j, mode)),
      fc.tuple(job, fc.constantFrom(1, 1, 2, 3)).map(([j, n]) => new Prepare(j, n)),
      fc.tuple(job, fc.constantFrom(1, 1, 2, 3)).map(([j, n]) => new Prepare(j, n)),
      fc.tuple(job, fc.constantFrom(1, 1, 2, 3)).map(([j, n]) => new Confirm(j, n)),
      fc.tuple(job, fc.constantFrom(1, 1, 2, 3)).map(([j, n]) => new Confirm(j, n)),
      job.map((j) => new PrepareConfirmRace(j)),
      job.map((j) => new Lapse(j)),
      fc.constant(new Settle()),
    ],
    { maxCommands: 30, size: 'medium' },
  );
};

/**
 * After a sequence, once the chain has settled: the balance equals the ledger; every debit has exactly one
 * anchored version or exactly one refund; nothing is non-terminal; no transaction per job twice; and on the
 * chain, no (ats_id, version) of this organization anchored twice, and each finalized one anchored.
 */
async function invariants(m: Model, r: Real, fromBlock: number): Promise<void> {
  const db = r.t.app.context.db;
  const txs = await settleAll(r);
  const nonTerminal = txs.filter((t) => t.status !== 'finalized' && t.status !== 'failed');
  if (nonTerminal.length) fail(`non-terminal transactions after settling: ${nonTerminal.map((t) => t.id)}`);
  const confirmedJobs = m.jobs
    .filter((j) => j.confirmed)
    .map((j) => j.id)
    .sort();
  const txJobs = txs.map((t) => t.job_id as string).sort();
  if (JSON.stringify(confirmedJobs) !== JSON.stringify(txJobs))
    fail(`transactions for jobs ${txJobs}, confirmed in the model ${confirmedJobs}`);

  const org = await db('organizations').where({ id: r.org }).first();
  const ledger = await db('credit_ledger').where({ organization_id: r.org });
  const sum = ledger.reduce((acc, e) => acc + Number(e.amount), 0);
  if (sum !== Number(org.credit_balance)) fail(`balance ${org.credit_balance} ≠ ledger ${sum}`);
  for (const debit of ledger.filter((e) => e.kind === 'debit')) {
    const tx = txs.find((t) => t.id === debit.reference) ?? fail(`a debit for no transaction: ${debit.reference}`);
    const anchored = await db('work_versions').where({ transaction_id: tx.id }).count<{ count: string }[]>('* as count');
    const refunds = ledger.filter((e) => e.kind === 'refund' && e.reference === tx.id).length;
    const ok =
      tx.status === 'finalized' ? Number(anchored[0]!.count) === 1 && refunds === 0 : Number(anchored[0]!.count) === 0 && refunds === 1;
    if (!ok) fail(`transaction ${tx.id} (${tx.status}): ${anchored[0]!.count} versions, ${refunds} refunds`);
  }
  if (ledger.filter((e) => e.kind === 'debit').length !== txs.length) fail('a transaction without its one debit');

  // the chain: this organization's anchors in the blocks of the sequence
  const wallet = await db('wallets').where({ organization_id: r.org, network: 'testnet' }).first();
  const head = (await r.t.chain.rpc.chain.getHeader(await r.t.chain.rpc.chain.getFinalizedHead())).number.toNumber();
  const anchors: string[] = [];
  for (let n = fromBlock; n <= head; n++) {
    const block = await r.t.chain.rpc.chain.getBlock(await r.t.chain.rpc.chain.getBlockHash(n));
    for (const x of block.block.extrinsics) {
      for (const bytes of remarksOf(x.method as unknown as CallLike)) {
        try {
          const a = decodeAnchor(bytes);
          if (`0x${a.ownerPublicKey.toString('hex')}` === wallet.public_key) anchors.push(`${a.atsId}/${a.version}`);
        } catch {
          // not an anchor of this service
        }
      }
    }
  }
  if (new Set(anchors).size !== anchors.length) fail(`anchored twice on chain: ${anchors.sort()}`);
  const versions = await db('work_versions')
    .join('works', 'works.id', 'work_versions.work_id')
    .where('works.organization_id', r.org)
    .select('works.ats_id', 'work_versions.version');
  const indexed = versions.map((v) => `${v.ats_id}/${v.version}`).sort();
  if (JSON.stringify(indexed) !== JSON.stringify([...anchors].sort())) fail(`indexed ${indexed}, anchored ${anchors.sort()}`);
}

export interface LifecycleStats {
  sequences: number;
  commands: number;
  requests: number;
}

/** Runs `numRuns` sequences, each for a fresh organization; throws fast-check's report on a broken property. */
/** The target on a running stack: a second web with short upload sessions, and a chain client. */
export async function lifecycleTarget(app: TestApp, shortTtlSeconds = 4): Promise<LifecycleTarget & { close(): Promise<void> }> {
  const shortApp = await startApp(
    configWith({ REDIS_PREFIX: app.context.config.redis.prefix, UPLOAD_TTL_SECONDS: String(shortTtlSeconds) }),
  );
  const chain = await ApiPromise.create({ provider: new WsProvider(app.context.config.chains[0]!.wsUrl), noInitWarn: true });
  return {
    app,
    shortApp,
    shortTtlSeconds,
    chain,
    async close() {
      await chain.disconnect();
      await shortApp.close();
    },
  };
}

export async function runLifecycle(
  t: LifecycleTarget,
  options: { numRuns: number; seed?: number },
  stats: LifecycleStats = { sequences: 0, commands: 0, requests: 0 },
): Promise<LifecycleStats> {
  await fc.assert(
    fc.asyncProperty(lifecycleCommands(), async (cmds) => {
      const org = await createOrg(t.app.context, 100_000);
      const real: Real = { t, org, key: await createKey(t.app.context, org), statuses: [] };
      const model: Model = { jobs: [], works: [] };
      const fromBlock = (await t.chain.rpc.chain.getHeader()).number.toNumber() + 1;
      const list = [...cmds];
      await fc.asyncModelRun(() => ({ model, real }), list);
      await invariants(model, real, fromBlock);
      stats.sequences++;
      stats.commands += list.length;
      stats.requests += real.statuses.length;
    }),
    { numRuns: options.numRuns, seed: options.seed, verbose: 1 },
  );
  return stats;
}
