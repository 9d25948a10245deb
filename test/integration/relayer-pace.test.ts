import { expect } from 'chai';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { eventually, startApp, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers, type TestWorkers } from '../helpers/workers';
import { register } from '../helpers/registration';
import { configWith } from '../helpers/services';
import { startLocalChain } from '../../shared/dev/embedded/chain';
import { relayerAddress } from '../../shared/chain/keys';
import { AnchorService, type SignedBatch } from '../../shared/chain/anchors';
import type { Inclusion } from '../../shared/chain/inclusion';
import type { Network } from '../../shared/config';
import { advanceTransaction } from '../../shared/transactions/pipeline';
import { RelayerSubmitter } from '../../shared/transactions/submitter';

const INTERVAL_MS = 4000;
/** How long each batch's signing is made to take: a burst's round (reading, fitting, signing) took 0.3 to 1.1 s. */
const SIGNING_MS = 1500;

/** A relayer whose signing is slow, and which notes when each batch was handed to the node. */
class SlowSigner extends AnchorService {
  readonly sentAt: number[] = [];
  signing = false;
  override async signBatch(network: Network, callHexes: readonly string[], nonce: number): Promise<SignedBatch> {
    this.signing = true;
    await new Promise((resolve) => setTimeout(resolve, SIGNING_MS));
    return super.signBatch(network, callHexes, nonce);
  }
  override submit(network: Network, hex: string, timeoutMs?: number): Promise<Inclusion> {
    this.sentAt.push(Date.now());
    return super.submit(network, hex, timeoutMs);
  }
}

/**
 * CHAIN_BATCH_INTERVAL_MS is the least time between two batches' sends while calls keep being made ready, and the
 * round that makes the next batch begins that long after the round that made the last one began: its signing
 * overlaps the interval rather than following it (shared/transactions/submitter.ts).
 */
describe("the relayer's batches, an interval apart", function () {
  this.timeout(180_000);
  const relayerSeed = '//PaceRelayer';
  let chain: Awaited<ReturnType<typeof startLocalChain>>;
  let app: TestApp;
  let workers: TestWorkers;
  let api: ApiPromise;

  before(async () => {
    // blocks only when told: the first batch waits in the pool, so it is the interval (not its landing) that paces
    // the next; no chain worker: the test runs the transactions' chain steps itself, in one submitter
    chain = await startLocalChain({ endow: [await relayerAddress(relayerSeed)], blocks: 3_600_000 });
    const config = configWith({
      REDIS_PREFIX: `pace_${Date.now()}`,
      CHAIN_TESTNET_WS: chain.wsUrl,
      RELAYER_SEED_TESTNET: relayerSeed,
      CHAIN_BATCH_INTERVAL_MS: String(INTERVAL_MS),
    });
    app = await startApp(config);
    workers = await startTestWorkers(config, ['prepare']);
    api = await ApiPromise.create({ provider: new WsProvider(chain.wsUrl), noInitWarn: true });
  });
  after(async () => {
    await workers?.stop();
    await app?.close();
    await api?.disconnect();
    await chain?.stop();
  });

  it('sends a call made ready after a batch no sooner than the interval after it, the signing inside the interval', async () => {
    const org = await createOrg(app.context, 10_000);
    const key = await createKey(app.context, org);
    const confirmed = async () => (await register(app.url, key.token)).confirm.body.transaction_id as string;
    const a = await confirmed();
    const b = await confirmed();
    const anchors = new SlowSigner(app.context.chains);
    const submitter = new RelayerSubmitter(app.context, anchors);
    const advance = (id: string) => advanceTransaction({ app: app.context, anchors, submitter }, id);
    const pool = async (n: number) => ((await api.rpc.author.pendingExtrinsics()).length === n ? true : undefined);

    const first = advance(a);
    await eventually(() => pool(1), 'the first batch in the pool');
    // made ready while the interval since the first batch runs (well within it: the first round began before its
    // signing's SIGNING_MS, and the interval is INTERVAL_MS from that beginning)
    anchors.signing = false;
    const second = advance(b);
    await eventually(() => pool(2), 'the second batch in the pool');
    expect(anchors.signing, 'the second call went in a batch of its own').to.equal(true);
    const [sentA, sentB] = anchors.sentAt;
    expect(sentB! - sentA!, 'no sooner than the interval after the first').to.be.at.least(INTERVAL_MS);
    // before, the next round began the interval after the first batch was sent, and its signing followed: the
    // interval and the whole signing apart, at the least
    expect(sentB! - sentA!, 'its signing done within the interval').to.be.below(INTERVAL_MS + SIGNING_MS);

    await chain.newBlock();
    const done = await Promise.all([first, second]);
    expect(done.map((t) => t.status)).to.deep.equal(['finalized', 'finalized']);
  });
});
