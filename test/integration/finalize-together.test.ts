import { expect } from 'chai';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { TestApp } from '../helpers/app';
import { useStack } from '../helpers/workers';
import { createKey, createOrg } from '../helpers/factories';
import { insertTransaction, updateTransaction } from '../../shared/transactions/repo';
import { enterStep } from '../../shared/transactions/steps';
import { finalize } from '../../shared/transactions/outcomes';
import { findWallet } from '../../shared/organizations/repo';
import { accessCodeAad } from '../../shared/webhooks/service';
import type { AnchorPayload } from '../../shared/transactions/anchor';

/**
 * A block's transactions reach finality together: those asked to be finalized while a finalization is under way
 * go together in the next, in one SQL transaction, each as it would alone; one that cannot be finalized fails
 * alone, and the others of its group are finalized all the same.
 */
describe('finalization of transactions that reach finality together', function () {
  this.timeout(60_000);
  // no worker: the deliveries and certificates enqueued stay in their queues, to be counted
  const stack = useStack({ env: { REDIS_PREFIX: `finalize_together_${Date.now()}` }, queues: [] });
  let app: TestApp;
  let organizationId: string;
  let apiKeyId: string;
  /** A second organization, its key with a webhook URL of its own. */
  let other: Owner;
  before(async () => {
    ({ app } = stack);
    organizationId = await createOrg(app.context);
    apiKeyId = (await createKey(app.context, organizationId, ['works:register'], 'http://127.0.0.1:9/hook')).id;
    const otherOrganization = await createOrg(app.context);
    const otherKey = await createKey(app.context, otherOrganization, ['works:register'], 'http://127.0.0.1:9/other-hook');
    other = { organizationId: otherOrganization, apiKeyId: otherKey.id };
  });
  // the rows left in a block on purpose (never finalizable: made-up blocks) go, so that no later test's reconciler, in
  // the shared database, takes them up (after each test: the stack's own after closes the database first)
  afterEach(async () => {
    await app.context
      .db('transactions')
      .whereIn('organization_id', [organizationId, other.organizationId])
      .whereIn('status', ['pending', 'submitted', 'in_block'])
      .del();
  });

  interface Owner {
    readonly organizationId: string;
    readonly apiKeyId: string;
  }

  const hex = (bytes: number) => `0x${randomBytes(bytes).toString('hex')}`;

  /**
   * A registration in a block, waiting for finality; `withoutBlock`: one whose block was never recorded. By default
   * the first organization's, titled "Together", with an ats_id of its own.
   */
  async function inBlock(
    withoutBlock = false,
    {
      owner,
      title = 'Together',
      atsId = Math.floor(Math.random() * 2 ** 30),
      creators = [{ full_name: 'A. Composer', roles: { composer: true } }],
    }: { owner?: Owner; title?: string; atsId?: number; creators?: AnchorPayload['creators'] | null } = {},
  ): Promise<string> {
    const jobId = randomUUID();
    const anchor: AnchorPayload = {
      jobId,
      commitment: hex(32),
      mediaHash: hex(32),
      merkleRoot: hex(32),
      audioKey: `audio/${jobId}`,
      audioSize: 1024,
      title,
      filename: 'together.wav',
      creators: creators as AnchorPayload['creators'],
      reusedAudio: false,
    };
    const tx = await app.context.db.transaction((trx) =>
      insertTransaction(trx, {
        id: randomUUID(),
        jobId,
        organizationId: owner?.organizationId ?? organizationId,
        apiKeyId: owner?.apiKeyId ?? apiKeyId,
        network: 'testnet',
        type: 'register',
        steps: enterStep([], 'validating'),
        anchor,
        priceCredits: 5,
        atsId,
        workId: null,
        externalUserRef: null,
        traceparent: null,
      }),
    );
    await updateTransaction(app.context.db, tx.id, {
      status: 'in_block',
      current_step: 'confirming',
      steps: enterStep(tx.steps, 'confirming'),
      tx_hash: hex(32),
      ...(withoutBlock ? {} : { block_hash: hex(32), block_number: 7, extrinsic_index: 1 }),
    });
    return tx.id;
  }

  /** How many statements each SQL transaction that `run` began ran, BEGIN and COMMIT included, in order. */
  async function sqlTransactions(run: () => Promise<unknown>): Promise<number[]> {
    const statements = new Map<string, number>();
    const count = (q: { __knexTxId?: string }) =>
      void (q.__knexTxId && statements.set(q.__knexTxId, (statements.get(q.__knexTxId) ?? 0) + 1));
    app.context.db.on('query', count);
    try {
      await run();
    } finally {
      app.context.db.off('query', count);
    }
    return [...statements.values()];
  }

  const finalized = async (ids: string[]) => {
    const rows = await app.context.db('transactions').whereIn('id', ids).select('id', 'status', 'work_id');
    const works = await app.context
      .db('works')
      .whereIn('id', rows.map((r) => r.work_id).filter(Boolean))
      .count<{ count: string }[]>();
    const events = await app.context.db('events').whereIn('transaction_id', ids).select('id', 'type');
    return { statuses: rows.map((r) => r.status as string), works: Number(works[0]!.count), events };
  };

  it('finalizes them in fewer SQL transactions than there are of them, each with its work, event, delivery and certificate', async () => {
    const ids = await Promise.all(Array.from({ length: 12 }, () => inBlock()));
    let rows: Awaited<ReturnType<typeof finalize>>[] = [];
    await findWallet(app.context.db, organizationId, 'testnet'); // kept by the process: neither finalization reads it
    const statements = await sqlTransactions(async () => {
      rows = await Promise.all(ids.map((id) => finalize(app.context, id)));
    });
    // the first alone (nothing was under way), the eleven asked for meanwhile together, with as many statements as
    // the one alone: the rows read and locked, the works with their versions, the transactions, the events
    expect(statements).to.have.length(2);
    expect(statements[1], `statements of the group of eleven, against ${statements[0]} alone`).to.equal(statements[0]);
    expect(statements[0]).to.equal(6); // BEGIN, the rows locked, three writes, COMMIT
    expect(rows.map((r) => r.id)).to.deep.equal(ids);
    expect(rows.every((r) => r.status === 'finalized' && r.currentStep === 'completed')).to.equal(true);
    const after = await finalized(ids);
    expect(after.statuses).to.deep.equal(ids.map(() => 'finalized'));
    expect(after.works).to.equal(12);
    expect(after.events.map((e) => e.type)).to.deep.equal(ids.map(() => 'work_registered'));
    const deliveries = await app.context.db('webhook_deliveries').whereIn(
      'event_id',
      after.events.map((e) => e.id),
    );
    expect(deliveries).to.have.length(12);
    // each value written as its column's type: JSON as JSON (not strings), bytes as bytes, times as given
    const written = await app.context
      .db('work_versions as v')
      .join('works as w', 'w.id', 'v.work_id')
      .join('transactions as t', 't.id', 'v.transaction_id')
      .join('events as e', 'e.transaction_id', 't.id')
      .whereIn('t.id', ids)
      .select(
        app.context.db.raw(`jsonb_typeof(v.creators) AS creators, jsonb_typeof(t.steps) AS steps, jsonb_typeof(t.result) AS result`),
        app.context.db.raw(`jsonb_typeof(e.payload) AS payload, length(w.access_code_hash) AS hash_bytes`),
        app.context.db.raw(
          `(SELECT d.sealed_access_code IS NOT NULL FROM webhook_deliveries d WHERE d.event_id = e.id) AS sealed, t.finalized_at = v.finalized_at AS same_time`,
        ),
        app.context.db.raw(
          `t.result->>'finalized_at' = e.payload->>'finalized_at' AS announced_time, v.creators->0->>'full_name' AS creator`,
        ),
      );
    expect(written).to.have.length(12);
    expect(new Set(written.map((w) => JSON.stringify(w)))).to.deep.equal(
      new Set([
        JSON.stringify({
          creators: 'array',
          steps: 'array',
          result: 'object',
          payload: 'object',
          hash_bytes: 32,
          sealed: true,
          same_time: true,
          announced_time: true,
          creator: 'A. Composer',
        }),
      ]),
    );
    const certificates = await Promise.all(rows.map((r) => app.context.queues.certificates.getJob(`certificate-${r.workId}-1`)));
    expect(certificates.every(Boolean), 'a certificate asked for each').to.equal(true);
    // finalized again (a rerun after a crash): nothing is written twice
    await Promise.all(ids.map((id) => finalize(app.context, id)));
    expect((await finalized(ids)).events).to.have.length(12);
  });

  it('fails one that cannot be finalized alone: the others of its group are finalized', async () => {
    const good = await Promise.all(Array.from({ length: 6 }, () => inBlock()));
    const bad = await inBlock(true);
    const ids = [good[0]!, ...good.slice(1, 3), bad, ...good.slice(3)];
    const outcomes = await Promise.allSettled(ids.map((id) => finalize(app.context, id)));
    const failed = outcomes.flatMap((o, i) => (o.status === 'rejected' ? [[ids[i], (o.reason as Error).message]] : []));
    expect(failed).to.deep.equal([[bad, `transaction ${bad} has no block to finalize`]]);
    const after = await finalized(good);
    expect(after.statuses).to.deep.equal(good.map(() => 'finalized'));
    expect(after.works).to.equal(6);
    expect(after.events).to.have.length(6);
    expect((await finalized([bad])).statuses).to.deep.equal(['in_block']);
    expect((await finalized([bad])).events).to.have.length(0);
  });
  it("writes each one's work, version, event and delivery for its own transaction, across organizations", async () => {
    const owners = [{ organizationId, apiKeyId }, other];
    const counted = async (organization: string) =>
      Number(
        (await app.context.db('work_counts').where({ organization_id: organization }).sum<{ sum: string | null }[]>('works as sum'))[0]!
          .sum ?? 0,
      );
    const countsBefore = await Promise.all(owners.map((o) => counted(o.organizationId)));
    const titles = Array.from({ length: 10 }, (_, i) => `Work ${i} ${randomUUID()}`);
    const ids = await Promise.all(titles.map((title, i) => inBlock(false, { owner: owners[i % 2], title })));
    const statements = await sqlTransactions(() => Promise.all(ids.map((id) => finalize(app.context, id))));
    expect(statements, 'one alone, nine together').to.have.length(2);
    const db = app.context.db;
    const rows = await db('transactions as t')
      .join('works as w', 'w.id', 't.work_id')
      .join('work_versions as v', 'v.transaction_id', 't.id')
      .join('events as e', 'e.transaction_id', 't.id')
      .join('webhook_deliveries as d', 'd.event_id', 'e.id')
      .whereIn('t.id', ids)
      .select(
        't.id',
        't.organization_id',
        't.api_key_id',
        't.ats_id',
        'w.organization_id as work_organization',
        'w.ats_id as work_ats_id',
        'w.title as work_title',
        'w.access_code_hash',
        'v.work_id as version_work',
        'v.title as version_title',
        'e.id as event_id',
        'e.organization_id as event_organization',
        'e.api_key_id as event_key',
        'e.payload',
        'd.sealed_access_code',
        'd.url',
        'd.api_key_id as delivery_key',
      );
    expect(rows.map((r) => r.id).sort()).to.deep.equal([...ids].sort());
    for (const r of rows) {
      const i = ids.indexOf(r.id);
      const owner = owners[i % 2]!;
      expect([r.organization_id, r.work_organization, r.event_organization]).to.deep.equal(Array(3).fill(owner.organizationId));
      expect([r.api_key_id, r.event_key, r.delivery_key]).to.deep.equal(Array(3).fill(owner.apiKeyId));
      expect([r.work_title, r.version_title]).to.deep.equal([titles[i], titles[i]]);
      expect(r.work_ats_id).to.equal(r.ats_id);
      expect(r.url).to.equal(i % 2 ? 'http://127.0.0.1:9/other-hook' : 'http://127.0.0.1:9/hook');
      expect(r.payload).to.include({ transaction_id: r.id, organization_id: owner.organizationId, api_key_id: owner.apiKeyId });
      expect(Number(r.payload.ats_id)).to.equal(Number(r.ats_id));
      // the access code sealed for this event is the one whose hash this work keeps
      const accessCode = app.context.box.open(r.sealed_access_code, accessCodeAad(r.event_id));
      expect(createHash('sha256').update(accessCode).digest().equals(r.access_code_hash), `access code of ${r.id}`).to.equal(true);
    }
    // the organizations' counters, kept by a statement-level trigger, grew by each one's own works
    expect(await Promise.all(owners.map((o) => counted(o.organizationId)))).to.deep.equal(countsBefore.map((n) => n + 5));
  });

  it('finalizes each alone when one write of the group fails (an ats_id taken twice): one of the two fails, the rest end', async () => {
    const atsId = Math.floor(Math.random() * 2 ** 30);
    const filler = await inBlock();
    const rest = await Promise.all([inBlock(), inBlock(false, { atsId }), inBlock(), inBlock(false, { atsId }), inBlock()]);
    const outcomes = await Promise.allSettled([filler, ...rest].map((id) => finalize(app.context, id)));
    const rejected = outcomes.flatMap((o) => (o.status === 'rejected' ? [(o.reason as { code?: string }).code] : []));
    expect(rejected, 'the second of the two works on one ats_id').to.deep.equal(['23505']);
    const after = await finalized([filler, ...rest]);
    expect(after.statuses.filter((status) => status === 'finalized')).to.have.length(5);
    expect(after.statuses.filter((status) => status === 'in_block')).to.have.length(1);
    expect(after.works).to.equal(5);
    expect(after.events).to.have.length(5);
  });
  it('finalizes an anchor backfilled without creators (null), its version with none', async () => {
    const id = await inBlock(false, { creators: null });
    const row = await finalize(app.context, id);
    expect(row.status).to.equal('finalized');
    const version = await app.context.db('work_versions').where({ transaction_id: id }).first('creators');
    expect(version.creators).to.deep.equal([]);
  });
});
