import { expect } from 'chai';
import type { TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { useStack } from '../helpers/workers';
import { register } from '../helpers/registration';
import { testServices } from '../helpers/services';
import { AnchorService, ERA_PERIOD } from '../../shared/chain/anchors';
import { advanceTransaction } from '../../shared/transactions/pipeline';
import { RelayerSubmitter } from '../../shared/transactions/submitter';
import { DiesBeforeSending } from '../helpers/anchor-faults';

describe('an extrinsic that outlives its mortal era unincluded', function () {
  this.timeout(180_000);
  const stack = useStack({ env: { REDIS_PREFIX: `mortality_${Date.now()}` }, queues: ['prepare'] }); // no chain worker listens here
  let app: TestApp;
  before(() => (app = stack.app));

  it('is signed again, once, and the work is registered and charged exactly once', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const r = await register(app.url, key.token);
    const txId = r.confirm.body.transaction_id as string;

    let crash: Error | undefined;
    const dying = new DiesBeforeSending(app.context.chains);
    await advanceTransaction({ app: app.context, anchors: dying, submitter: new RelayerSubmitter(app.context, dying) }, txId).catch(
      (e: Error) => (crash = e),
    );
    expect(crash?.message).to.equal('worker died before sending');
    const signedOnce = await app.context.db('transactions').where({ id: txId }).first();
    expect(signedOnce.signings).to.equal(1);
    const firstBatch = await app.context.db('chain_submissions').where({ id: signedOnce.submission_id }).first();
    expect(firstBatch).to.deep.include({ status: 'signed', items: 1 });

    // let the era pass without the bytes ever reaching a block
    for (let i = 0; i <= ERA_PERIOD; i++) await testServices().embedded.chains[0]!.newBlock();

    const anchors = new AnchorService(app.context.chains);
    const done = await advanceTransaction({ app: app.context, anchors, submitter: new RelayerSubmitter(app.context, anchors) }, txId);
    expect(done.status).to.equal('finalized');
    const row = await app.context.db('transactions').where({ id: txId }).first();
    expect(row.signings).to.equal(2);
    expect(row.tx_hash).to.not.equal(signedOnce.tx_hash);
    expect((await app.context.db('chain_submissions').where({ id: firstBatch.id }).first()).status).to.equal('expired');
    expect((await app.context.db('chain_submissions').where({ id: row.submission_id }).first()).status).to.equal('finalized');
    expect(await app.context.db('works').where({ organization_id: org }).count<{ count: string }[]>('* as count')).to.deep.equal([
      { count: '1' },
    ]);
    expect((await app.context.db('credit_ledger').where({ organization_id: org, reference: txId })).map((e) => e.kind)).to.deep.equal([
      'debit',
    ]);
  });
});
