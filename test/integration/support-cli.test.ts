import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { eventually, startApp, type TestApp } from '../helpers/app';
import { admin } from '../helpers/cli';
import { createKey, createOrg, type TestKey } from '../helpers/factories';
import { WebhookReceiver } from '../helpers/receiver';
import { initBody, register, settled } from '../helpers/registration';
import { configWith, testServices } from '../helpers/services';
import { startTestWorkers, useStack } from '../helpers/workers';
import { withConnection } from '../../shared/db/knex';
import { STEPS } from '../../shared/transactions/steps';
import { organizationActivity } from '../../shared/support/org-activity';
import { transactionStory } from '../../shared/support/transaction-story';

const HOUR = 3600_000;
const ago = (ms: number) => new Date(Date.now() - ms);

/**
 * The support tools of the operator CLI (issue 22): `transaction show` and `org activity`, run as separate
 * processes against one organization's real registrations, one finalized (its webhook refused once, then
 * delivered) and one failed (the relayer cannot pay; its webhook refused for good), plus rows of the
 * organization's own inserted with earlier times, to show what a window leaves out.
 */
describe('operator CLI: support tools', function () {
  this.timeout(180_000);
  const prefix = `support_${Date.now()}`;
  const stack = useStack({ env: { REDIS_PREFIX: prefix, WEBHOOK_RETRY_SCHEDULE: '1,1,1' } });
  const env = () => testServices().env;
  let app: TestApp;
  let org: string;
  let finalized: { id: string; price: number; key: TestKey; hooks: WebhookReceiver };
  let failed: { id: string; price: number; key: TestKey; hooks: WebhookReceiver };

  before(async () => {
    app = stack.app;
    org = await createOrg(app.context, 1000);

    // finalized: the first delivery of its work_registered answered 500, the retry 200
    const hooks = await new WebhookReceiver().start();
    hooks.respond = (_req, index) => ({ status: index === 0 ? 500 : 200 });
    const key = await createKey(app.context, org, ['works:register'], hooks.url);
    const ok = await register(app.url, key.token);
    finalized = { id: ok.confirm.body.transaction_id, price: ok.prepare.body.total_price_credits, key, hooks };
    expect((await settled(app.context, finalized.id)).status).to.equal('finalized');
    await hooks.waitFor(2);

    // failed: chain workers whose relayer has no funds (its pool refuses the batch until CHAIN_GIVE_UP_AFTER, then
    // refunds), on a Redis prefix of their own; its work_failed answered 400, so the delivery dies at once
    const refused = `${prefix}_refused`;
    const funded = configWith({ REDIS_PREFIX: refused });
    const broke = configWith({ REDIS_PREFIX: refused, RELAYER_SEED_TESTNET: '//NobodyFundedThis', CHAIN_GIVE_UP_AFTER: '4' });
    const web = await startApp(funded);
    const preparer = await startTestWorkers(funded, ['prepare']);
    const chain = await startTestWorkers(broke, ['chain', 'webhooks']);
    const deadHooks = await new WebhookReceiver().start();
    deadHooks.respond = () => ({ status: 400 });
    try {
      const deadKey = await createKey(app.context, org, ['works:register'], deadHooks.url);
      const bad = await register(web.url, deadKey.token, initBody({ external_user_ref: 'u-7' }));
      failed = { id: bad.confirm.body.transaction_id, price: bad.prepare.body.total_price_credits, key: deadKey, hooks: deadHooks };
      expect((await settled(app.context, failed.id)).status).to.equal('failed');
      await deadHooks.waitFor(1);
      await deliveryOf(app.context.db, failed.id, 'dead');
    } finally {
      await chain.stop();
      await preparer.stop();
      await web.close();
    }
    await deliveryOf(app.context.db, finalized.id, 'delivered');
  });
  after(async () => {
    await finalized?.hooks.stop();
    await failed?.hooks.stop();
  });

  describe('transaction show', () => {
    it("prints a finalized registration's whole story: steps, extrinsic and block, each webhook attempt, the debit", async () => {
      const { code, out, err } = await admin(['transaction', 'show', '--id', finalized.id], env());
      expect(code, JSON.stringify(err)).to.equal(0);
      expect(Object.keys(out)).to.have.members([
        'transaction',
        'steps',
        'chain',
        'result',
        'events',
        'deliveries',
        'ledger',
        'trace_id',
        'trace_sampled',
      ]);
      const version = await app.context.db('work_versions').where({ transaction_id: finalized.id }).first();
      expect(out.transaction).to.deep.equal({
        id: finalized.id,
        organization_id: org,
        api_key_id: finalized.key.id,
        type: 'register',
        network: 'testnet',
        status: 'finalized',
        current_step: 'completed',
        price_credits: finalized.price,
        ats_id: Number((await app.context.db('works').where({ id: version.work_id }).first()).ats_id),
        version: 1,
        work_id: version.work_id,
        external_user_ref: null,
        created_at: out.transaction.created_at,
        updated_at: out.transaction.updated_at,
        finalized_at: version.finalized_at.toISOString(),
      });
      expect(Date.parse(out.transaction.created_at)).to.be.below(Date.parse(out.transaction.finalized_at));

      // every step, in order, each with its time, none before the one it follows
      expect(out.steps.map((s: { name: string }) => s.name)).to.deep.equal([...STEPS]);
      expect(out.steps.every((s: { status: string }) => s.status === 'completed')).to.equal(true);
      const times = out.steps.map((s: { at: string }) => Date.parse(s.at));
      expect(times).to.deep.equal([...times].sort((a, b) => a - b));
      expect(times[0]).to.be.at.least(Date.parse(out.transaction.created_at) - 1000);

      // the extrinsic and block are those of the index, and of the relayer batch that carried the call
      const landed = { tx_hash: version.tx_hash, block_number: version.block_number, block_hash: version.block_hash };
      expect(out.chain).to.deep.include({ ...landed, extrinsic_index: version.extrinsic_index, signings: 1 });
      expect(out.chain.submission).to.deep.include({ ...landed, extrinsic_index: version.extrinsic_index, status: 'finalized' });
      expect(out.chain.submission.nonce).to.be.a('number');
      expect(out.chain.batch_index).to.be.within(0, out.chain.submission.calls - 1);
      expect(out.result).to.deep.include({ ...landed, ats_id: out.transaction.ats_id, version: 1, work_id: version.work_id });

      const [hook, retried] = finalized.hooks.received;
      // the access code goes again with the retry of an attempt that failed, and is gone from the rows once delivered
      expect(hook!.body.access_code).to.match(/^atc_[0-9a-f]{64}$/);
      expect(retried!.body.access_code).to.equal(hook!.body.access_code);
      expect(out.events).to.have.length(1);
      expect(out.events[0]).to.deep.include({ type: 'work_registered', payload: { ...hook!.body, access_code: null } });
      expect(out.deliveries).to.have.length(1);
      const [delivery] = out.deliveries;
      expect(delivery).to.deep.include({
        id: hook!.headers['x-service-delivery'],
        event_id: out.events[0].id,
        event: 'work_registered',
        url: finalized.hooks.url,
        status: 'delivered',
        next_attempt_at: null,
      });
      const attempts = delivery.attempts.map((a: Record<string, unknown>) => [a.attempt, a.status_code, a.outcome, a.error]);
      expect(attempts).to.deep.equal([
        [1, 500, 'retry', null],
        [2, 200, 'delivered', null],
      ]);
      const [first, second] = delivery.attempts;
      // the retry was due about a second after the refusal (the schedule's 1 s; `at` is when the attempt was recorded,
      // by the database's clock, a busy machine's moment after), and came no sooner
      expect(Date.parse(first.next_attempt_at) - Date.parse(first.at)).to.be.within(0, 2000);
      expect(Date.parse(second.at)).to.be.at.least(Date.parse(first.next_attempt_at) - 250);
      expect(second.next_attempt_at).to.equal(null);
      expect(Date.parse(delivery.delivered_at)).to.be.at.least(Date.parse(second.at));
      for (const a of delivery.attempts) expect(a.duration_ms).to.be.a('number').at.least(0);

      expect(out.ledger.map((e: Record<string, unknown>) => [e.kind, e.amount, e.reason])).to.deep.equal([
        ['debit', -finalized.price, 'register'],
      ]);
    });

    it("prints a failed registration's story: the refused batch, the error, the dead delivery, the debit and its refund", async () => {
      const { code, out } = await admin(['transaction', 'show', '--id', failed.id], env());
      expect(code).to.equal(0);
      expect(out.transaction).to.deep.include({ status: 'failed', current_step: 'failed', external_user_ref: 'u-7', finalized_at: null });
      expect(out.steps.at(-1)).to.deep.include({ name: 'failed', status: 'failed' });
      expect(out.steps.map((s: { name: string }) => s.name)).to.include.members(['validating', 'submitting']);
      expect(out.result.error.code).to.equal('chain.submission_rejected');
      // the last batch that carried the call, refused by the pool: never in a block
      expect(out.chain).to.deep.include({ block_number: null, block_hash: null, extrinsic_index: null });
      expect(out.chain.signings).to.be.at.least(1);
      expect(out.chain.submission).to.deep.include({
        tx_hash: out.chain.tx_hash,
        status: 'rejected',
        block_number: null,
        block_hash: null,
      });

      expect(out.events.map((e: { type: string }) => e.type)).to.deep.equal(['work_failed']);
      expect(out.events[0].payload).to.deep.include({ transaction_id: failed.id, reason: 'chain.submission_rejected', ats_id: null });
      const [delivery] = out.deliveries;
      expect(delivery).to.deep.include({ status: 'dead', url: failed.hooks.url, delivered_at: null, next_attempt_at: null });
      expect(delivery.attempts.map((a: Record<string, unknown>) => [a.attempt, a.status_code, a.outcome, a.next_attempt_at])).to.deep.equal(
        [[1, 400, 'dead', null]],
      );

      expect(out.ledger.map((e: Record<string, unknown>) => [e.kind, e.amount, e.reason])).to.deep.equal([
        ['debit', -failed.price, 'register'],
        ['refund', failed.price, 'chain.submission_rejected'],
      ]);
      expect(Date.parse(out.ledger[1].created_at)).to.be.at.least(Date.parse(out.ledger[0].created_at));
    });

    it('prints the trace id of the transaction’s traceparent, and null when it has none', async () => {
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const trace = (traceparent: string | null) => app.context.db('transactions').where({ id: finalized.id }).update({ traceparent });
      const show = async () => (await admin(['transaction', 'show', '--id', finalized.id], env())).out;
      await trace(`00-${traceId}-00f067aa0ba902b7-01`);
      expect(await show()).to.include({ trace_id: traceId, trace_sampled: true });
      await trace(`00-${traceId}-00f067aa0ba902b7-00`); // not sampled: the logs have it, no collector does
      expect(await show()).to.include({ trace_id: traceId, trace_sampled: false });
      await trace(null);
      expect(await show()).to.include({ trace_id: null, trace_sampled: false });
    });

    it('answers an unknown id with common.not_found, a malformed one with a usage error, neither with SQL', async () => {
      const [unknown, malformed, injected, missing] = await Promise.all([
        admin(['transaction', 'show', '--id', randomUUID()], env()),
        admin(['transaction', 'show', '--id', 'not-a-uuid'], env()),
        admin(['transaction', 'show', '--id', `${finalized.id}' OR '1'='1`], env()),
        admin(['transaction', 'show'], env()),
      ]);
      expect(unknown.code).to.not.equal(0);
      expect(unknown.err.error).to.deep.include({ code: 'common.not_found', message: 'Transaction not found' });
      for (const refused of [malformed, injected, missing]) {
        expect(refused.code).to.not.equal(0);
        expect(refused.out).to.equal(undefined);
        expect(refused.err.error.code).to.equal('common.bad_request');
        expect(refused.err.error.message).to.not.match(/select|transactions|uuid:|syntax/i);
      }
    });
  });

  describe('org activity', () => {
    // rows of the organization's own, as they would be from earlier confirms: a version pending for 10 minutes,
    // and a registration that failed 3 hours ago, each debited (and the failed one refunded) when it happened
    let pendingVersion: string;
    let oldFailure: string;
    let foreign: string;
    const inserted: string[] = [];
    // taken out again: a maintenance run of a later test file would otherwise find the pending one and try to submit it
    after(() => app.context.db('transactions').whereIn('id', inserted).delete());
    before(async () => {
      const db = app.context.db;
      const insert = async (organizationId: string, apiKeyId: string, at: Date, row: Record<string, unknown>) => {
        const id = randomUUID();
        const steps = JSON.stringify([{ name: 'validating', status: 'completed', at: at.toISOString() }]);
        await db('transactions').insert({
          id,
          organization_id: organizationId,
          api_key_id: apiKeyId,
          network: 'testnet',
          type: 'register',
          price_credits: 0,
          steps,
          anchor: '{}',
          ...row,
          created_at: at,
          updated_at: at,
        });
        inserted.push(id);
        return id;
      };
      const entry = (kind: 'debit' | 'refund', amount: number, reference: string, at: Date) =>
        db('credit_ledger').insert({ organization_id: org, kind, amount, balance_after: 0, reference, reason: 'test', created_at: at });
      pendingVersion = await insert(org, finalized.key.id, ago(10 * 60_000), {
        type: 'add_version',
        price_credits: 3,
        ats_id: 0,
        version: 2,
      });
      await entry('debit', -3, pendingVersion, ago(10 * 60_000));
      oldFailure = await insert(org, finalized.key.id, ago(3 * HOUR), {
        type: 'register',
        price_credits: 11,
        status: 'failed',
        current_step: 'failed',
        result: JSON.stringify({ error: { code: 'chain.expired', message: 'The chain did not take the transaction' } }),
      });
      await entry('debit', -11, oldFailure, ago(3 * HOUR));
      await entry('refund', 11, oldFailure, ago(3 * HOUR - 60_000));
      const other = await createOrg(app.context, 0);
      foreign = await insert(other, (await createKey(app.context, other)).id, ago(60_000), {});
    });

    it('lists the last hour newest first, failures with their reason, and sums the window', async () => {
      const { code, out, err } = await admin(['org', 'activity', '--org', org, '--since', '1h'], env());
      expect(code, JSON.stringify(err)).to.equal(0);
      expect(out.organization).to.deep.include({ organization_id: org });
      expect(Date.parse(out.since)).to.be.within(Date.now() - HOUR - 60_000, Date.now() - HOUR + 1000);
      expect(out.transactions.map((t: { id: string }) => t.id)).to.deep.equal([failed.id, finalized.id, pendingVersion]);
      expect(out).to.deep.include({ limit: 100, truncated: false });
      const [bad, good, version] = out.transactions;
      expect(Object.keys(good)).to.have.members([
        'id',
        'type',
        'network',
        'status',
        'current_step',
        'ats_id',
        'version',
        'external_user_ref',
        'created_at',
        'finalized_at',
        'error',
      ]);
      const work = await app.context.db('work_versions').where({ transaction_id: finalized.id }).first();
      expect(good).to.deep.include({
        type: 'register',
        status: 'finalized',
        version: 1,
        error: null,
        finalized_at: work.finalized_at.toISOString(),
      });
      // a registration's ats_id is allocated at confirm: the failed one keeps the id it would have had
      expect(bad).to.deep.include({ type: 'register', status: 'failed', external_user_ref: 'u-7', finalized_at: null, version: null });
      expect(bad.ats_id).to.be.a('number');
      expect(bad.error.code).to.equal('chain.submission_rejected');
      expect(bad.error.message).to.be.a('string').that.is.not.empty;
      expect(version).to.deep.include({ type: 'add_version', status: 'pending', ats_id: 0, version: 2, error: null });

      expect(out.summary).to.deep.equal({
        transactions: 3,
        by_status: { pending: 1, submitted: 0, in_block: 0, finalized: 1, failed: 1 },
        by_type: { register: 2, add_version: 1 },
        failures: { 'chain.submission_rejected': 1 },
        credits: { spent: finalized.price + failed.price + 3, refunded: failed.price },
      });
    });

    it('takes a longer window, or one from a timestamp, and never lists another organization’s work', async () => {
      const [wide, fromTimestamp] = await Promise.all([
        admin(['org', 'activity', '--org', org, '--since', '4h'], env()),
        admin(['org', 'activity', '--org', org, '--since', ago(2 * HOUR).toISOString()], env()),
      ]);
      expect(wide.out.transactions.map((t: { id: string }) => t.id)).to.deep.equal([failed.id, finalized.id, pendingVersion, oldFailure]);
      expect(wide.out.transactions[3].error).to.deep.equal({ code: 'chain.expired', message: 'The chain did not take the transaction' });
      expect(wide.out.summary).to.deep.include({
        transactions: 4,
        failures: { 'chain.submission_rejected': 1, 'chain.expired': 1 },
        credits: { spent: finalized.price + failed.price + 3 + 11, refunded: failed.price + 11 },
      });
      expect(fromTimestamp.out.transactions.map((t: { id: string }) => t.id)).to.deep.equal([failed.id, finalized.id, pendingVersion]);
      for (const listing of [wide, fromTimestamp])
        expect(listing.out.transactions.map((t: { id: string }) => t.id)).to.not.include(foreign);
    });

    it('bounds the list with --limit and says it was cut, while the summary counts the whole window', async () => {
      const { out } = await admin(['org', 'activity', '--org', org, '--since', '1h', '--limit', '1'], env());
      expect(out.transactions.map((t: { id: string }) => t.id)).to.deep.equal([failed.id]);
      expect(out).to.deep.include({ limit: 1, truncated: true });
      expect(out.summary.transactions).to.equal(3);
    });

    it('answers an unknown organization with common.not_found, and a bad --since or --limit with a usage error', async () => {
      const unknown = await admin(['org', 'activity', '--org', randomUUID(), '--since', '1h'], env());
      expect(unknown.code).to.not.equal(0);
      expect(unknown.err.error.code).to.equal('common.not_found');
      const refusals = await Promise.all(
        // (the forms --since takes and refuses are listed in test/unit/support-inputs.test.ts)
        [
          ['--since', 'yesterday'],
          ['--since', '2026-11-23T06:00:00'],
          ['--since', '1h', '--limit', '1001'],
          ['--since', '1h', '--limit', 'ten'],
          [],
        ].map((flags) => admin(['org', 'activity', '--org', org, ...flags], env())),
      );
      for (const refused of refusals) {
        expect(refused.code).to.not.equal(0);
        expect(refused.err.error.code, refused.err.error.message).to.equal('common.bad_request');
      }
    });
  });

  it('reads through indexes only: the window from (organization_id, created_at), the story by keys', async () => {
    const db = app.context.db;
    const statements = await captured(db, async () => {
      await organizationActivity(db, { organizationId: org, since: ago(HOUR), limit: 100 });
      await transactionStory(db, finalized.id);
      await transactionStory(db, failed.id);
    });
    const plans = await Promise.all(statements.filter((s) => /^\s*select/i.test(s.sql)).map((s) => plan(db, s)));
    expect(plans.length).to.be.at.least(10);
    for (const p of plans) expect(p.plan, p.sql).to.not.match(/Seq Scan/);
    const windowed = (table: string) => plans.filter((p) => p.sql.includes(`from "${table}"`) && p.sql.includes('"created_at" >='));
    const transactionsWindow = windowed('transactions');
    expect(transactionsWindow).to.have.length(2);
    for (const p of transactionsWindow)
      expect(p.plan, p.sql)
        .to.match(/transactions_organization_id_created_at_index/)
        .and.match(/Index Cond: .*created_at >=/);
    const [ledgerWindow, ...more] = windowed('credit_ledger');
    expect(more).to.have.length(0);
    expect(ledgerWindow!.plan)
      .to.match(/credit_ledger_organization_created_index/)
      .and.match(/Index Cond: .*created_at >=/);
  });
});

/** Waits for the webhook delivery of the transaction's event to reach `status`. */
function deliveryOf(db: Knex, transactionId: string, status: 'delivered' | 'dead') {
  return eventually(async () => {
    const row = await db('webhook_deliveries as d')
      .join('events as e', 'e.id', 'd.event_id')
      .where('e.transaction_id', transactionId)
      .first('d.status');
    return row?.status === status ? row : undefined;
  }, `the delivery of ${transactionId} to be ${status}`);
}

/** The statements `fn` sent through `db`, as PostgreSQL received them ($n placeholders and their values). */
async function captured(db: Knex, fn: () => Promise<void>): Promise<{ sql: string; bindings: unknown[] }[]> {
  const seen: { sql: string; bindings: unknown[] }[] = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) => seen.push({ sql: q.sql, bindings: q.bindings ?? [] });
  db.on('query', listener);
  try {
    await fn();
  } finally {
    db.off('query', listener);
  }
  return seen;
}

/** A statement's plan with sequential scans discouraged: one that remains shows no index could serve it. */
function plan(db: Knex, statement: { sql: string; bindings: unknown[] }): Promise<{ sql: string; plan: string }> {
  return withConnection(db, async (connection) => {
    await connection.query({ text: 'BEGIN', values: [] });
    try {
      await connection.query({ text: 'SET LOCAL enable_seqscan = off', values: [] });
      const { rows } = await connection.query({ text: `EXPLAIN ${statement.sql}`, values: statement.bindings });
      return { sql: statement.sql, plan: rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n') };
    } finally {
      await connection.query({ text: 'ROLLBACK', values: [] });
    }
  });
}
