import { expect } from 'chai';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { call, eventually, startApp, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers, type TestWorkers } from '../helpers/workers';
import { quote } from '../helpers/registration';
import { configWith } from '../helpers/services';
import { expectExactlyOnce } from '../helpers/exactly-once';
import { startLocalChain } from '../../shared/dev/embedded/chain';
import { relayerAddress } from '../../shared/chain/keys';

/**
 * A node may refuse a relayer batch the runtime's weight answer said fits (1010, "Transaction would exhaust the block
 * limits": a parachain's proof size, a node's own length limit). Its calls used to be fitted into a batch of the same
 * size at every round, refused each time, until CHAIN_GIVE_UP_AFTER failed and refunded them all. They now go out in
 * smaller batches (shared/chain/batch.ts, `refusedAsTooLarge`), each charged once and anchored once.
 */
describe('a relayer batch the node refuses as too large', function () {
  this.timeout(180_000);
  const relayerSeed = '//TooLargeRelayer';
  let chain: Awaited<ReturnType<typeof startLocalChain>>;
  let app: TestApp;
  let quoting: TestWorkers;
  let chainWorkers: TestWorkers | undefined;
  let api: ApiPromise;
  let config: ReturnType<typeof configWith>;

  before(async () => {
    // blocks only when this test builds them; the node refuses any batch of more than three calls
    chain = await startLocalChain({ endow: [await relayerAddress(relayerSeed)], blocks: 3_600_000 });
    chain.refuseBatchesOver(3);
    // after a batch, the next waits 3 s for calls to gather (or a block, which only this test builds): the calls
    // confirmed together are ready together by then, and go in one batch
    config = configWith({
      REDIS_PREFIX: `too_large_${Date.now()}`,
      CHAIN_TESTNET_WS: chain.wsUrl,
      RELAYER_SEED_TESTNET: relayerSeed,
      CHAIN_BATCH_INTERVAL_MS: '3000',
    });
    app = await startApp(config);
    quoting = await startTestWorkers(config, ['prepare']);
    api = await ApiPromise.create({ provider: new WsProvider(chain.wsUrl), noInitWarn: true });
  });
  after(async () => {
    await chainWorkers?.stop();
    await quoting?.stop();
    await app?.close();
    await api?.disconnect();
    await chain?.stop();
  });

  it('sends its calls again in batches of half as many, halving at each refusal, each charged once and anchored once', async () => {
    const org = await createOrg(app.context, 10_000);
    const key = await createKey(app.context, org);
    const quoted = await Promise.all(Array.from({ length: 8 }, () => quote(app.url, key.token)));
    const fromBlock = (await api.rpc.chain.getHeader()).number.toNumber() + 1;
    const ids = await Promise.all(
      quoted.map(async ({ jobId }) => {
        const reply = await call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: jobId } });
        expect(reply.status, reply.text).to.equal(202);
        return reply.body.transaction_id as string;
      }),
    );
    // the chain jobs run now, all eight confirmed: their calls are ready within the submitter's 3 s
    chainWorkers = await startTestWorkers(config, ['chain']);
    // a block for what the node took, until every call is final
    await eventually(
      async () => {
        if ((await api.rpc.author.pendingExtrinsics()).length > 0) await chain.newBlock();
        const done = await app.context
          .db('transactions')
          .whereIn('id', ids)
          .where({ status: 'finalized' })
          .count<{ count: string }[]>('* as count');
        return Number(done[0]!.count) === ids.length ? true : undefined;
      },
      'every call finalized',
      90_000,
    );
    await expectExactlyOnce(app.context, api, org, ids, fromBlock);

    // this test's relayer's batches: its chain's
    const rows = (await app.context
      .db('chain_submissions')
      .where({ relayer: await relayerAddress(relayerSeed) })
      .orderBy('created_at')
      .select('status', 'items')) as { status: string; items: number }[];
    const refused = rows.filter((r) => r.status === 'rejected').map((r) => r.items);
    const taken = rows.filter((r) => r.status !== 'rejected').map((r) => r.items);
    expect(refused.length, 'a batch of more than three calls was refused').to.be.above(0);
    expect(refused.every((items) => items > 3)).to.equal(true);
    // each refusal halves the most a batch carries: eight calls refused in a batch of at most 8, then at most 4, then
    // batches of at most 2 go (where the same size used to be refused at every round)
    expect(refused.length, `refused batches of ${refused.join(', ')} calls`).to.be.at.most(2);
    for (let i = 1; i < refused.length; i++) expect(refused[i]).to.be.at.most(Math.floor(refused[i - 1]! / 2));
    // and no further: the calls still share batches
    expect(taken.every((items) => items <= 3)).to.equal(true);
    expect(Math.max(...taken), `batches taken of ${taken.join(', ')} calls`).to.be.above(1);
  });
});
