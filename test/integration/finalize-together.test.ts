import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import type { TestApp } from '../helpers/app';
import { useStack } from '../helpers/workers';
import { createKey, createOrg } from '../helpers/factories';
import { insertTransaction, updateTransaction } from '../../shared/transactions/repo';
import { enterStep } from '../../shared/transactions/steps';
import { finalize } from '../../shared/transactions/outcomes';
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
  before(async () => {
    ({ app } = stack);
    organizationId = await createOrg(app.context);
    apiKeyId = (await createKey(app.context, organizationId, ['works:register'], 'http://127.0.0.1:9/hook')).id;
  });

  const hex = (bytes: number) => `0x${randomBytes(bytes).toString('hex')}`;

  /** A registration in a block, waiting for finality; `withoutBlock`: one whose block was never recorded. */
  async function inBlock(withoutBlock = false): Promise<string> {
    const jobId = randomUUID();
    const anchor: AnchorPayload = {
      jobId,
      commitment: hex(32),
      mediaHash: hex(32),
      merkleRoot: hex(32),
      audioKey: `audio/${jobId}`,
      audioSize: 1024,
      title: 'Together',
      filename: 'together.wav',
      creators: [{ full_name: 'A. Composer', roles: { composer: true } }],
      reusedAudio: false,
    };
    const tx = await app.context.db.transaction((trx) =>
      insertTransaction(trx, {
        id: randomUUID(),
        jobId,
        organizationId,
        apiKeyId,
        network: 'testnet',
        type: 'register',
        steps: enterStep([], 'validating'),
        anchor,
        priceCredits: 5,
        atsId: Math.floor(Math.random() * 2 ** 30),
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

  /** How many SQL transactions `run` began. */
  async function sqlTransactions(run: () => Promise<unknown>): Promise<number> {
    let began = 0;
    const count = (q: { sql: string }) => void (/^BEGIN/i.test(q.sql) && began++);
    app.context.db.on('query', count);
    try {
      await run();
    } finally {
      app.context.db.off('query', count);
    }
    return began;
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
    const began = await sqlTransactions(async () => {
      rows = await Promise.all(ids.map((id) => finalize(app.context, id)));
    });
    // the first alone (nothing was under way), the eleven asked for meanwhile together
    expect(began).to.equal(2);
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
});
