import { expect } from 'chai';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { Keyring } from '@polkadot/keyring';
import { cryptoWaitReady } from '@polkadot/util-crypto';
import { startLocalChain } from '../../shared/dev/embedded/chain';

/**
 * chopsticks takes into its pool an extrinsic whose nonce is not yet due (its validation answers "valid, once the
 * nonce before it is in"), then drops it without a word when a block's building refuses it. The local chain tells
 * `onRefused` of each such drop, so that a bench whose calls never land shows why (docs/performance.md, section 37).
 */
describe('the local chain: extrinsics a block refused', function () {
  this.timeout(120_000);
  let chain: Awaited<ReturnType<typeof startLocalChain>>;
  let api: ApiPromise;
  const refused: { extrinsic: string; reason: string }[] = [];
  let signer: ReturnType<Keyring['addFromUri']>;

  before(async () => {
    await cryptoWaitReady();
    signer = new Keyring({ type: 'sr25519' }).addFromUri('//LocalChainRefused');
    // blocks only when this test builds them
    chain = await startLocalChain({
      endow: [signer.address],
      blocks: 3_600_000,
      onRefused: (extrinsic, reason) => refused.push({ extrinsic, reason }),
    });
    api = await ApiPromise.create({ provider: new WsProvider(chain.wsUrl), noInitWarn: true });
  });
  after(async () => {
    await api?.disconnect();
    await chain?.stop();
  });

  it('tells of one whose nonce was not yet due, and of none that landed', async () => {
    const nonce = (await api.rpc.system.accountNextIndex(signer.address)).toNumber();
    const due = await api.tx.system.remark('0x01').signAsync(signer, { nonce, era: 0 });
    const early = await api.tx.system.remark('0x02').signAsync(signer, { nonce: nonce + 2, era: 0 });
    await api.rpc.author.submitExtrinsic(due.toHex());
    await api.rpc.author.submitExtrinsic(early.toHex());
    await chain.newBlock();

    const block = await api.rpc.chain.getBlock();
    const carried = block.block.extrinsics.map((x) => x.hash.toHex());
    expect(carried).to.include(due.hash.toHex());
    expect(carried).not.to.include(early.hash.toHex());
    expect(refused.map((r) => r.extrinsic)).to.deep.equal([early.toHex()]);
    expect(refused[0]!.reason).to.match(/future/i);
    // dropped, where a Substrate node would keep it until its nonce is due
    expect((await api.rpc.author.pendingExtrinsics()).map((x) => x.hash.toHex())).not.to.include(early.hash.toHex());
  });
});
