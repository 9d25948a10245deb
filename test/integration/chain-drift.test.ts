import { expect } from 'chai';
import type { Knex } from 'knex';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { Keyring } from '@polkadot/keyring';
import { eventually, logsFromNow, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers, useStack } from '../helpers/workers';
import { register, settled } from '../helpers/registration';
import { configWith, testServices } from '../helpers/services';
import { AnchorService } from '../../shared/chain/anchors';
import { advanceTransaction } from '../../shared/transactions/pipeline';
import { RelayerSubmitter, relayerLockKey } from '../../shared/transactions/submitter';
import type { Network } from '../../shared/config';
import { DiesBeforeSending } from '../helpers/anchor-faults';
import { unfinalNonces } from '../../shared/transactions/submissions-repo';
import { allocateNonces } from '../../shared/chain/nonces';

/**
 * Fault injection: the relayer's advisory lock is lost while a round fits its batch (the backend of the connection
 * holding it is terminated, as a server restart or a dropped connection would end it).
 */
class LosesTheLock extends AnchorService {
  lockTaken = false;
  constructor(
    chains: ConstructorParameters<typeof AnchorService>[0],
    private readonly db: Knex,
  ) {
    super(chains);
  }
  override async fitBatch(network: Network, callHexes: readonly string[], max: number): Promise<number> {
    if (!this.lockTaken) {
      this.lockTaken = true;
      const key = relayerLockKey(network, this.relayerAddress(network));
      const { rows } = await this.db.raw(
        `SELECT pg_terminate_backend(pid) AS ended FROM pg_locks
          WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND objid::bigint = (hashtext(?)::bigint & 4294967295)`,
        [key],
      );
      expect(rows, "the relayer's lock, held by the round").to.deep.equal([{ ended: true }]);
    }
    return super.fitBatch(network, callHexes, max);
  }
}

/**
 * The chain's nonce is the truth (issue 17): a relayer nonce taken from outside, a database whose memory of
 * the relayer is wrong, or a node of another chain never fail a paid registration.
 */
describe('the relayer against a chain that is not as the database remembers it', function () {
  this.timeout(240_000);
  const prefix = `drift_${Date.now()}`;
  const stack = useStack({ env: { REDIS_PREFIX: prefix }, queues: ['prepare'] }); // chain workers are started per test
  let app: TestApp;
  let api: ApiPromise;
  before(async () => {
    app = stack.app;
    api = await ApiPromise.create({ provider: new WsProvider(testServices().config.chains[0]!.wsUrl), noInitWarn: true });
  });
  after(() => api.disconnect());

  const relayer = () => new Keyring({ type: 'sr25519' }).addFromUri(testServices().env.RELAYER_SEED_TESTNET!);
  const debitsAndRefunds = async (org: string) =>
    (await app.context.db('credit_ledger').where({ organization_id: org }).whereNot({ kind: 'grant' }).orderBy('id')).map((e) => e.kind);

  it('a nonce taken by another sender between signing and sending: the pool refuses, the call is signed again and lands once', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const r = await register(app.url, key.token);
    const txId = r.confirm.body.transaction_id as string;
    const dying = new DiesBeforeSending(app.context.chains);
    await advanceTransaction({ app: app.context, anchors: dying, submitter: new RelayerSubmitter(app.context, dying) }, txId).catch(
      () => undefined,
    );
    const first = await app.context
      .db('chain_submissions')
      .where({ id: (await app.context.db('transactions').where({ id: txId }).first()).submission_id })
      .first();
    expect(first.status).to.equal('signed');

    // something else uses the relayer's account with that very nonce, and gets into a block first
    await new Promise<void>((resolve, reject) => {
      void api.tx.system
        .remark('0x6f7574736964652073656e646572')
        .signAndSend(relayer(), { nonce: Number(first.nonce) }, ({ status }) => (status.isInBlock ? resolve() : undefined))
        .catch(reject);
    });

    const anchors = new AnchorService(app.context.chains);
    const done = await advanceTransaction({ app: app.context, anchors, submitter: new RelayerSubmitter(app.context, anchors) }, txId);
    expect(done.status).to.equal('finalized');
    expect((await app.context.db('chain_submissions').where({ id: first.id }).first()).status).to.equal('expired');
    const row = await app.context.db('transactions').where({ id: txId }).first();
    expect(Number((await app.context.db('chain_submissions').where({ id: row.submission_id }).first()).nonce)).to.be.greaterThan(
      Number(first.nonce),
    );
    expect(await debitsAndRefunds(org)).to.deep.equal(['debit']);
  });

  it('a remembered nonce far ahead of the chain (a restored backup, a chain started afresh) is not used: registrations land', async () => {
    const relayerAddress = relayer().address;
    const chainNonce = (await api.rpc.system.accountNextIndex(relayerAddress)).toNumber();
    await app.context
      .db('relayer_nonces')
      .where({ network: 'testnet', address: relayerAddress })
      .update({ next_nonce: chainNonce + 51 });
    // and a batch left "signed" at a nonce the chain has not reached: the pool refuses it as from the future
    const anchors = new AnchorService(app.context.chains);
    const stale = await anchors.signBatch('testnet', [api.tx.system.remarkWithEvent('0x00').method.toHex()], chainNonce + 50);
    const genesis = (await anchors.genesisHash('testnet')).toString('hex');
    await app.context.db('chain_submissions').insert({
      network: 'testnet',
      relayer: relayerAddress,
      nonce: chainNonce + 50,
      genesis_hash: genesis,
      extrinsic_hex: stale.hex,
      tx_hash: stale.hash,
      signed_at_block: stale.signedAtBlock,
      items: 0,
    });

    const workers = await startTestWorkers(stack.config, ['chain']);
    try {
      const org = await createOrg(app.context, 1000);
      const key = await createKey(app.context, org);
      const txs = await Promise.all([1, 2, 3].map(async () => (await register(app.url, key.token)).confirm.body.transaction_id as string));
      for (const id of txs) expect((await settled(app.context, id)).status).to.equal('finalized');
      expect(await debitsAndRefunds(org)).to.deep.equal(['debit', 'debit', 'debit']);
      // the batch from the future is never signed over while the node may hold it; the new ones took the
      // chain's nonces below it, not the remembered one
      const used = await app.context
        .db('chain_submissions')
        .whereIn('id', app.context.db('transactions').whereIn('id', txs).select('submission_id'))
        .pluck('nonce');
      for (const nonce of used) expect(Number(nonce)).to.be.within(chainNonce, chainNonce + 49);
      expect(['signed', 'rejected']).to.include((await app.context.db('chain_submissions').where({ tx_hash: stale.hash }).first()).status);
    } finally {
      await workers.stop();
      // this test's batch from the future leaves the shared database's relayer as it found it
      await app.context.db('chain_submissions').where({ tx_hash: stale.hash, status: 'signed' }).update({ status: 'rejected' });
    }
  });

  it('a node of another chain: nothing is submitted or refunded; in development the old chain is forgotten and the work lands', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const ours = logsFromNow();
    // the database's chain state belongs to a chain the node does not serve
    const real = (await new AnchorService(app.context.chains).genesisHash('testnet')).toString('hex');
    const other = 'ab'.repeat(32);
    await app.context.db.raw(
      'INSERT INTO chain_genesis (network, genesis_hash) VALUES (?, ?) ON CONFLICT (network) DO UPDATE SET genesis_hash = EXCLUDED.genesis_hash',
      ['testnet', other],
    );
    const strict = await startTestWorkers(stack.config, ['chain']);
    let txId: string;
    try {
      txId = (await register(app.url, key.token)).confirm.body.transaction_id as string;
      await eventually(
        async () => (ours().some((l) => l.includes(`this database's submissions were made on ${other}`)) ? true : undefined),
        'the refusal to submit, logged',
      );
      const row = await app.context.db('transactions').where({ id: txId }).first();
      expect(row.status).to.equal('pending');
      expect(row.submission_id).to.equal(null);
      expect(await debitsAndRefunds(org)).to.deep.equal(['debit']);
    } finally {
      await strict.stop();
    }
    const forgiving = await startTestWorkers(configWith({ REDIS_PREFIX: prefix, CHAIN_FORGET_ON_NEW_GENESIS: 'true' }), ['chain']);
    try {
      // the job retries on its own schedule; the reconciler would re-enqueue it too: here, enqueue at once
      await app.context.queues.chain.add('transaction', { transactionId: txId }, { jobId: `${txId}-again` });
      expect((await settled(app.context, txId)).status).to.equal('finalized');
      expect((await app.context.db('chain_genesis').where({ network: 'testnet' }).first()).genesis_hash).to.equal(real);
      expect(ours().some((l) => l.includes('chain started afresh'))).to.equal(true);
      expect(await debitsAndRefunds(org)).to.deep.equal(['debit']);
    } finally {
      await forgiving.stop();
    }
  });

  it('CHAIN_FORGET_ON_NEW_GENESIS is refused in production', () => {
    expect(() => configWith({ NODE_ENV: 'production', CHAIN_FORGET_ON_NEW_GENESIS: 'true' })).to.throw(
      /CHAIN_FORGET_ON_NEW_GENESIS must not be set in production/,
    );
  });
  it("holds the nonces of a relayer's batches not yet final, one seen in a block too (a reorg puts it back in the pool)", async () => {
    // a relayer of this test's own: its rows are the only ones counted
    const address = new Keyring({ type: 'sr25519' }).addFromUri(`//drift-${Date.now()}`).address;
    const statuses = ['signed', 'in_block', 'finalized', 'expired', 'rejected'] as const;
    await app.context.db('chain_submissions').insert(
      statuses.map((status, i) => ({
        network: 'testnet',
        relayer: address,
        nonce: 10 + i,
        genesis_hash: '00'.repeat(32),
        extrinsic_hex: '0x00',
        tx_hash: `0x${String(i).repeat(64)}`,
        signed_at_block: 1,
        items: 0,
        status,
      })),
    );
    try {
      const held = await unfinalNonces(app.context.db, 'testnet', address);
      expect(held.sort()).to.deep.equal([10n, 11n]);
      // the best block's state at 10 (a reorg took back the block carrying 11, whose batch is in the pool again): 12
      expect(allocateNonces(10n, held, 1).nonces).to.deep.equal([12n]);
      // the block carrying 10 and 11 the best (its state at 12): 12
      expect(allocateNonces(12n, held, 1).nonces).to.deep.equal([12n]);
    } finally {
      // a batch left signed would be sent again by the next submitter of this network
      await app.context.db('chain_submissions').where({ relayer: address }).delete();
    }
  });
  it('a round whose lock was lost while it fitted its batch stores no batch; the job then lands it once under a new lock', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const r = await register(app.url, key.token);
    const txId = r.confirm.body.transaction_id as string;
    const losing = new LosesTheLock(app.context.chains, app.context.db);
    const failed = await advanceTransaction(
      { app: app.context, anchors: losing, submitter: new RelayerSubmitter(app.context, losing) },
      txId,
    ).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(losing.lockTaken, 'the lock was taken away mid-round').to.equal(true);
    // the signing transaction ran on the lock's connection, gone with it: nothing stored, nothing sent
    expect(failed, 'the round ended with its connection').to.be.instanceOf(Error);
    const row = await app.context.db('transactions').where({ id: txId }).first();
    expect([row.status, row.submission_id]).to.deep.equal(['pending', null]);

    const anchors = new AnchorService(app.context.chains);
    const done = await advanceTransaction({ app: app.context, anchors, submitter: new RelayerSubmitter(app.context, anchors) }, txId);
    expect(done.status).to.equal('finalized');
    expect(await app.context.db('chain_submissions').whereIn('id', [done.submissionId!]).pluck('status')).to.deep.equal(['finalized']);
    expect(await debitsAndRefunds(org)).to.deep.equal(['debit']);
  });
});
