import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import nock from 'nock';
import type { Env } from '../../shared/config';
import { openResources, type Resources } from '../../shared/resources';
import { testLogger } from '../helpers/app';
import { createKey, createOrg, type TestKey } from '../helpers/factories';
import { register } from '../helpers/registration';
import { configWith, testServices } from '../helpers/services';
import { spawnWeb, type WebProcess } from '../helpers/web-process';
import { spawnWorker, type WorkerProcess } from '../helpers/workers';
import { verifySignature, WebhookReceiver } from '../helpers/receiver';
import { OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver';

const SERVER = 2;
const PRODUCER = 4;
const CONSUMER = 5;

/**
 * Traces across processes (issue 22): a web and a worker as the Procfile runs them, exporting over OTLP/HTTP to a
 * receiver in this process. One registration, whose first webhook attempt is refused, must make one trace from
 * the confirm request through the chain job, the batch, finality, indexing and both webhook attempts.
 */
describe('traces across processes', function () {
  this.timeout(240_000);
  const prefix = `tracing_${Date.now().toString(36)}`;
  const otlp = new OtlpReceiver();
  const hooks = new WebhookReceiver();
  let ctx: Resources;
  let key: TestKey;
  let organizationId: string;
  let web: WebProcess;
  let worker: WorkerProcess;
  let workerLog: string;
  let transactionId: string;
  /** The spans of the registration's trace, once both webhook attempts' are in. */
  let trace: ReceivedSpan[];

  // the clients below talk to real processes: nock's interceptor stays out of their sockets
  before(() => nock.restore());
  after(() => nock.activate());

  before(async () => {
    await otlp.start();
    await hooks.start();
    hooks.respond = (_req, index) => (index === 0 ? { status: 503 } : { status: 200 });
    const overrides: Env = {
      REDIS_PREFIX: prefix,
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      WEBHOOK_RETRY_SCHEDULE: '1',
      LOG_LEVEL: 'info',
    };
    const env = { ...testServices().env, ...overrides };
    ctx = openResources(configWith(overrides), testLogger(), 'dev');
    organizationId = await createOrg(ctx, 10_000);
    key = await createKey(ctx, organizationId, undefined, hooks.url);
    workerLog = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tracing-')), 'worker.log');
    worker = spawnWorker(env, [], fs.openSync(workerLog, 'w'));
    web = await spawnWeb(env);
    for (const queue of ['prepare', 'chain', 'webhooks'] as const)
      while ((await ctx.queues[queue].getWorkersCount()) === 0) await new Promise((r) => setTimeout(r, 100));

    // one registration, its first webhook attempt refused
    const r = await register(web.url, key.token);
    expect(r.confirm.status).to.equal(202);
    transactionId = r.confirm.body.transaction_id;
    await hooks.waitFor(2, 120_000);
    // the trace is the confirm's; wait until both attempts' spans are in
    trace = await otlp.until((spans) => {
      const confirm = spans.find((s) => s.name === 'works.confirm' && s.attributes['works.transaction_id'] === transactionId);
      if (!confirm) return undefined;
      const of = spans.filter((s) => s.traceId === confirm.traceId);
      return of.filter((s) => s.name === 'webhook.attempt').length >= 2 ? of : undefined;
    });
  });

  after(async () => {
    for (const p of [web, worker]) p?.kill('SIGTERM');
    await Promise.all([web, worker].map((p) => p?.exited));
    await ctx?.close();
    await hooks.stop();
    await otlp.stop();
  });

  it('one trace from the confirm request through chain, batch, finality, indexing and every webhook attempt', async () => {
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const ancestors = (span: ReceivedSpan): ReceivedSpan[] => {
      const chain: ReceivedSpan[] = [];
      for (let p = byId.get(span.parentSpanId); p; p = byId.get(p.parentSpanId)) chain.push(p);
      return chain;
    };
    const one = (name: string, where: (s: ReceivedSpan) => boolean = () => true) => {
      const found = trace.filter((s) => s.name === name && where(s));
      expect(found, `${name} in ${describeTree(trace)}`).to.have.length(1);
      return found[0]!;
    };
    const under = (child: ReceivedSpan, parent: ReceivedSpan) =>
      expect(
        ancestors(child).map((s) => s.spanId),
        `${child.name} under ${parent.name} in ${describeTree(trace)}`,
      ).to.include(parent.spanId);

    // the web: the request (the trace's root), the confirm under it, the chain job added under the confirm
    const request = one('POST /v1/works/confirm', (s) => s.kind === SERVER);
    expect(request.parentSpanId).to.equal('');
    expect(request.service).to.equal('works-api-web');
    const confirm = one('works.confirm');
    under(confirm, request);
    expect(confirm.attributes).to.include({ 'works.organization_id': organizationId, 'works.transaction_id': transactionId });
    const added = one('add chain.transaction', (s) => s.kind === PRODUCER);
    under(added, confirm);

    // the worker: the job's run, the batch it rode in, finality, indexing, each carrying the ids
    const run = one('process chain', (s) => s.kind === CONSUMER);
    expect(run.service).to.equal('works-api-worker');
    under(run, added);
    const ids = { 'works.organization_id': organizationId, 'works.transaction_id': transactionId };
    expect(run.attributes).to.include(ids);
    const submit = one('chain.submit');
    under(submit, run);
    expect(submit.attributes).to.include(ids);
    expect(submit.attributes['works.batch.size']).to.be.a('number').at.least(1);
    expect(submit.attributes['works.chain.tx_hash']).to.match(/^0x[0-9a-f]{64}$/);
    const finality = one('chain.finality');
    under(finality, run);
    expect(finality.attributes['works.chain.block_number']).to.equal(submit.attributes['works.chain.block_number']);
    const index = one('works.index');
    under(index, run);

    // the webhooks: two attempts (503, then 200), each under the indexing that recorded the event, each with its POST
    const attempts = trace
      .filter((s) => s.name === 'webhook.attempt')
      .sort((a, b) => Number(a.attributes['works.webhook.attempt']) - Number(b.attributes['works.webhook.attempt']));
    expect(attempts.map((a) => [a.attributes['works.webhook.attempt'], a.attributes['works.webhook.outcome']])).to.deep.equal([
      [1, 'retry'],
      [2, 'delivered'],
    ]);
    for (const attempt of attempts) {
      under(attempt, index);
      expect(attempt.attributes).to.include({ ...ids, 'works.webhook.event': 'work_registered' });
      const post = trace.filter((s) => s.parentSpanId === attempt.spanId && s.name === 'POST');
      expect(post, `the attempt's POST in ${describeTree(trace)}`).to.have.length(1);
    }
    // and each POST arrived as it would untraced, its trace context added to its own headers: signed, named, typed
    const arrived = hooks.received.filter((r) => r.body?.transaction_id === transactionId);
    expect(arrived).to.have.length(2);
    for (const received of arrived) {
      expect(verifySignature(key.webhookSecret, received), JSON.stringify(received.headers)).to.equal(true);
      expect(received.headers).to.include({ 'content-type': 'application/json', 'x-service-event': 'work_registered' });
      expect(received.headers['traceparent']).to.match(new RegExp(`^00-${confirm.traceId}-`));
      expect(Object.keys(received.headers).filter((name) => /^\d+$/.test(name))).to.deep.equal([]);
    }
    // the relayer's round (many transactions' batch) is in no transaction's trace: its lock query is nowhere here
    const statements = trace.map((s) => String(s.attributes['db.statement'] ?? s.attributes['db.query.text'] ?? ''));
    // (the job's read of its transaction row, a prepared statement naming its columns: transactions/repo.ts)
    expect(statements.some((q) => /\bFROM "?transactions"? WHERE "?id"? = \$1/i.test(q))).to.equal(true);
    expect(statements.filter((q) => q.includes('pg_try_advisory_lock'))).to.deep.equal([]);
    // the database and Redis calls of the job are in it too (pg and ioredis instrumentations)
    expect(trace.some((s) => s.attributes['db.system'] === 'postgresql' || s.attributes['db.system.name'] === 'postgresql')).to.equal(true);
    expect(trace.some((s) => s.attributes['db.system'] === 'redis' || s.attributes['db.system.name'] === 'redis')).to.equal(true);

    // the transaction row keeps the trace, and the web's log lines of the confirm carry its id
    const row = await ctx.db('transactions').where({ id: transactionId }).first('traceparent');
    expect(row.traceparent).to.match(new RegExp(`^00-${confirm.traceId}-${confirm.spanId}-01$`));
    expect(web.logs.filter((line) => line.trace_id === confirm.traceId)).to.not.be.empty;
    // and so does the worker's line of the refused attempt
    const workerLines = fs
      .readFileSync(workerLog, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    // (its own delivery's: the database is shared, and this worker may also retry a delivery an earlier test left due)
    const delivery = await ctx
      .db('webhook_deliveries as d')
      .join('events as e', 'e.id', 'd.event_id')
      .where('e.transaction_id', transactionId)
      .first('d.id');
    const refused = workerLines.filter((l) => l.msg === 'job failed' && l.queue === 'webhooks' && String(l.job_id).startsWith(delivery.id));
    expect(refused.map((l) => l.trace_id)).to.deep.equal([confirm.traceId]);
  });

  it('a caller’s trace context is not joined: its request starts a trace of the service’s own', async () => {
    const partner = { traceId: 'a'.repeat(32), spanId: 'b'.repeat(16) };
    const res = await fetch(`${web.url}/v1/transactions/${transactionId}`, {
      headers: {
        Authorization: `Bearer ${key.token}`,
        traceparent: `00-${partner.traceId}-${partner.spanId}-01`,
        baggage: 'partner=hello',
      },
    });
    expect(res.status).to.equal(200);
    const served = await otlp.until((spans) =>
      spans.find(
        (s) => s.kind === SERVER && s.name === 'GET /v1/transactions/:transaction_id' && s.attributes['http.response.status_code'] === 200,
      ),
    );
    expect(served.traceId).to.not.equal(partner.traceId);
    expect(served.parentSpanId).to.equal('');
    expect(otlp.raw.join('\n')).to.not.include(partner.traceId).and.not.include('partner=hello');
  });

  it('no secret, nor personal data, in any span exported', async () => {
    const { env } = testServices();
    const secrets = [key.token, key.webhookSecret, env.SECRETS_KEY, env.RELAYER_SEED_TESTNET, env.S3_SECRET_ACCESS_KEY].filter(
      (s): s is string => Boolean(s),
    );
    expect(otlp.spans.length).to.be.greaterThan(10);
    // BullMQ's job-completed event would carry the prepare's quote: the creators' names and e-mails, the title
    expect(otlp.spans.some((s) => s.name === 'process prepare')).to.equal(true);
    for (const personal of ['ada@example.test', 'Lovelace', 'Babbage', 'Symphony for Engines'])
      expect(otlp.raw.join('\n'), personal).to.not.include(personal);
    const everything = otlp.raw.join('\n');
    for (const secret of secrets) expect(everything.includes(secret), 'a secret in an exported span').to.equal(false);
    // nor an access code, a bearer header, a presigned signature, or a Redis command's arguments
    expect(everything).to.not.match(/atc_[0-9a-f]{64}|Bearer |X-Amz-Signature=[0-9a-f]|wrk_live_/);
    const redis = otlp.spans.filter((s) => s.attributes['db.system'] === 'redis' || s.attributes['db.system.name'] === 'redis');
    expect(redis).to.not.be.empty;
    for (const s of redis) expect(String(s.attributes['db.statement'] ?? s.attributes['db.query.text'] ?? '')).to.match(/^[a-z]*$/i);
  });
});

function describeTree(spans: readonly ReceivedSpan[]): string {
  const children = new Map<string, ReceivedSpan[]>();
  for (const s of spans) children.set(s.parentSpanId, [...(children.get(s.parentSpanId) ?? []), s]);
  const ids = new Set(spans.map((s) => s.spanId));
  const lines: string[] = [];
  const walk = (s: ReceivedSpan, depth: number) => {
    lines.push(`${'  '.repeat(depth)}${s.name} [${s.service}]`);
    for (const c of children.get(s.spanId) ?? []) walk(c, depth + 1);
  };
  for (const root of spans.filter((s) => !ids.has(s.parentSpanId))) walk(root, 0);
  return `\n${lines.join('\n')}\n`;
}
