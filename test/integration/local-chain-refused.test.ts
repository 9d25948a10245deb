import { expect } from 'chai';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { Keyring } from '@polkadot/keyring';
import { cryptoWaitReady } from '@polkadot/util-crypto';
import { startLocalChain } from '../../shared/dev/embedded/chain';
import { eventually } from '../helpers/app';

/**
 * chopsticks takes into its pool an extrinsic whose nonce is not yet due (its validation answers "valid, once the
 * nonce before it is in"), then drops it without a word when a block's building refuses it. The local chain tells
 * `onRefused` of each such drop, so that a bench whose calls never land shows why; and it takes submissions one at a
 * time, so that two sent one after the other cannot join the pool in the other order, the later nonce first, and be
 * refused so (docs/performance.md, section 37).
 */
describe('the local chain: the order of submissions, and extrinsics a block refused', function () {
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

  it('takes submissions one at a time in the order they came, so that a nonce sent after the one before it lands with it', async () => {
    refused.length = 0;
    const nonce = (await api.rpc.system.accountNextIndex(signer.address)).toNumber();
    const first = await api.tx.system.remark('0x03').signAsync(signer, { nonce, era: 0 });
    const second = await api.tx.system.remark('0x04').signAsync(signer, { nonce: nonce + 1, era: 0 });
    const holdFirst = chain.holdNextSubmission();
    const sentFirst = api.rpc.author.submitExtrinsic(first.toHex());
    const letFirstGo = await holdFirst;
    // the first still being read by the node: the second arrives, and waits its turn
    let secondReachedTheNode = false;
    const holdSecond = chain.holdNextSubmission().then((letGo) => ((secondReachedTheNode = true), letGo));
    const receivedBefore = chain.submissionsReceived;
    const sentSecond = api.rpc.author.submitExtrinsic(second.toHex());
    await eventually(async () => (chain.submissionsReceived > receivedBefore ? true : undefined), 'the second submission received');
    expect(secondReachedTheNode, 'the second waits for the first').to.equal(false);
    letFirstGo();
    (await holdSecond)();
    await Promise.all([sentFirst, sentSecond]);
    expect((await api.rpc.author.pendingExtrinsics()).map((x) => x.hash.toHex())).to.deep.equal([first.hash.toHex(), second.hash.toHex()]);

    await chain.newBlock();
    const carried = (await api.rpc.chain.getBlock()).block.extrinsics.map((x) => x.hash.toHex());
    expect(carried).to.include.members([first.hash.toHex(), second.hash.toHex()]);
    expect(refused).to.deep.equal([]);
  });
});
