import { expect } from 'chai';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { call, eventually, jobReaches, startApp, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers, type TestWorkers } from '../helpers/workers';
import { quote } from '../helpers/registration';
import { configWith } from '../helpers/services';
import { startLocalChain } from '../../shared/dev/embedded/chain';
import { relayerAddress } from '../../shared/chain/keys';
import { AnchorService, SILENT_BLOCKS } from '../../shared/chain/anchors';
import { expectExactlyOnce } from '../helpers/exactly-once';
import { outcomeIn } from '../../shared/chain/inclusion';

/**
 * A call confirmed between two blocks rides a batch into the very next block: the submitter does not wait for
 * a block to be imported before it sends what was made ready meanwhile (shared/transactions/submitter.ts).
 */
describe('relayer batches between blocks', function () {
  this.timeout(180_000);
  // a chain of this test's own that builds a block only when told to, with its own relayer
  const relayerSeed = '//RhythmRelayer';
  let chain: Awaited<ReturnType<typeof startLocalChain>>;
  let app: TestApp;
  let workers: TestWorkers;
  let api: ApiPromise;

  before(async () => {
    chain = await startLocalChain({ endow: [await relayerAddress(relayerSeed)], blocks: 3_600_000 });
    const config = configWith({ REDIS_PREFIX: `rhythm_${Date.now()}`, CHAIN_TESTNET_WS: chain.wsUrl, RELAYER_SEED_TESTNET: relayerSeed });
    app = await startApp(config);
    workers = await startTestWorkers(config, ['prepare', 'chain']);
    api = await ApiPromise.create({ provider: new WsProvider(chain.wsUrl), noInitWarn: true });
  });
  after(async () => {
    await workers?.stop();
    await app?.close();
    await api?.disconnect();
    await chain?.stop();
  });

  const best = async () => (await api.rpc.chain.getHeader()).number.toNumber();
  const rows = (ids: string[]) =>
    app.context.db('transactions').whereIn('id', ids).orderBy('created_at').select('status', 'block_number', 'tx_hash');
  // signed and stored (status submitted), then sent: in the node's pool. Well before 30 s, after which a
  // submitter waiting for a block that does not come looks for ready calls anyway.
  const sent = async (ids: string[]) => {
    const within = 15_000;
    await eventually(async () => ((await rows(ids)).every((r) => r.status === 'submitted') ? true : undefined), 'signed', within);
    await eventually(async () => ((await api.rpc.author.pendingExtrinsics()).length === ids.length ? true : undefined), 'sent', within);
  };

  const confirm = async (token: string, jobId: string) => {
    const reply = await call(app.url, 'POST', '/v1/works/confirm', { token, body: { job_id: jobId } });
    expect(reply.status, reply.text).to.equal(202);
    return reply.body.transaction_id as string;
  };

  const finalized = (ids: string[], what: string) =>
    eventually(async () => {
      const now = await rows(ids);
      return now.every((r) => r.status === 'finalized') ? now : undefined;
    }, what);
  /** A new organization's registration, confirmed, its batch sent (in the node's pool), and the best height before it. */
  const oneInPool = async () => {
    const org = await createOrg(app.context, 10_000);
    const key = await createKey(app.context, org);
    const pending = await quote(app.url, key.token);
    const height = await best();
    const id = await confirm(key.token, pending.jobId);
    await sent([id]);
    return { org, id, height };
  };

  it('sends a call made ready while a batch waits for its block, and both land in that next block', async () => {
    const org = await createOrg(app.context, 10_000);
    const key = await createKey(app.context, org);
    const [first, second] = [await quote(app.url, key.token), await quote(app.url, key.token)];
    const height = await best();
    const a = await confirm(key.token, first.jobId);
    await sent([a]);
    // the first batch waits in the pool for a block that has not come; the second call is confirmed meanwhile
    const b = await confirm(key.token, second.jobId);
    await sent([a, b]);
    expect(await best(), 'no block was built meanwhile').to.equal(height);
    const [ra, rb] = await rows([a, b]);
    expect(ra!.tx_hash, 'two relayer extrinsics').to.not.equal(rb!.tx_hash);

    await chain.newBlock();
    const landed = await finalized([a, b], 'both finalized');
    expect(landed.map((r) => Number(r.block_number))).to.deep.equal([height + 1, height + 1]);

    // each batch's outcome read from the block, which is fetched, and its events read, once for both (inclusion.ts)
    const provider = new WsProvider(chain.wsUrl);
    const counting = await ApiPromise.create({ provider, noInitWarn: true });
    const asked: string[] = [];
    const send = provider.send.bind(provider);
    provider.send = ((method: string, ...rest: unknown[]) => {
      asked.push(method);
      return (send as (...args: unknown[]) => Promise<unknown>)(method, ...rest);
    }) as typeof provider.send;
    try {
      const blockHash = (await api.rpc.chain.getBlockHash(height + 1)).toHex();
      const hashes = landed.map((r) => r.tx_hash as string);
      const outcomes = await Promise.all(hashes.map((hash) => outcomeIn(counting, blockHash, hash)));
      const again = await outcomeIn(counting, blockHash, hashes[1]!);
      expect(
        asked.filter((m) => m === 'chain_getBlock'),
        'the block fetched once',
      ).to.have.length(1);
      expect(
        asked.filter((m) => m === 'state_getStorage'),
        'its events read once',
      ).to.have.length(1);
      expect(outcomes.map((o) => [o?.success, o?.items.map((i) => i.status)])).to.deep.equal([
        [true, ['ok']],
        [true, ['ok']],
      ]);
      expect(new Set(outcomes.map((o) => o!.index)).size, 'each its own extrinsic').to.equal(2);
      expect(again).to.deep.equal(outcomes[1]);
    } finally {
      await counting.disconnect();
    }
  });

  // @polkadot/api subscribes again, after a reconnection, to everything but `author_` watches: a batch's watch
  // whose connection dropped hears nothing more, and used to wait out its 120 s timeout (60 blocks of 2 s)
  // this test's own connection drops with the others
  const reconnected = async () => {
    if (!api.isConnected) await new Promise((connected) => api.once('connected', connected));
  };
  const inPoolAgain = () =>
    eventually(async () => ((await api.rpc.author.pendingExtrinsics()).length > 0 ? true : undefined), 'the bytes sent again');
  const outages = {
    'the block built once the node is back': async () => {
      await chain.unreachableFor(500);
      await chain.newBlock();
    },
    // every connection is dropped as unreachableFor is called (front.close destroys them at once)
    'the block built while the node is away': async () => {
      const away = chain.unreachableFor(1000);
      await chain.newBlock();
      await away;
    },
    // a node restarted without its pool (a Substrate node keeps it in memory): the same bytes must reach it again
    'the pool lost while the node is away': async () => {
      const away = chain.unreachableFor(1000);
      chain.losePool();
      await away;
      await reconnected();
      await inPoolAgain();
      await chain.newBlock();
    },
  };
  for (const [when, outage] of Object.entries(outages)) {
    it(`a batch whose connection to the node dropped while it waited in the pool is recorded once the node is back: ${when}`, async () => {
      const { org, id, height } = await oneInPool();
      // every connection dropped, new ones refused for a moment (a node restart as its clients see it); the pool kept
      await outage();
      const [landed] = await finalized([id], 'the batch recorded and finalized well before the watch would time out');
      expect(Number(landed!.block_number)).to.equal(height + 1);
      await reconnected();
      await expectExactlyOnce(app.context, api, org, [id], height + 1);
    });
  }

  // the watch's request unanswered when the connection drops: @polkadot fails the request itself before it tells of the
  // drop, which used to read as a refusal and fail the round with every job waiting on it (shared/chain/submit.ts)
  it('a batch whose connection dropped before the node answered its submission is sent again once the node is back', async () => {
    const org = await createOrg(app.context, 10_000);
    const key = await createKey(app.context, org);
    const pending = await quote(app.url, key.token);
    const height = await best();
    const held = chain.holdNextSubmission();
    const id = await confirm(key.token, pending.jobId);
    await held;
    expect(await api.rpc.author.pendingExtrinsics(), 'the held bytes never reached the pool').to.have.length(0);
    await chain.unreachableFor(500);
    await reconnected();
    await inPoolAgain();
    expect((await rows([id]))[0]!.status, 'still on its way, not failed').to.equal('submitted');
    await chain.newBlock();
    const [landed] = await finalized([id], 'the batch sent again, recorded and finalized');
    expect(Number(landed!.block_number)).to.equal(height + 1);
    // carried by the job's first run: the drop failed no round (it used to fail it, and the job ran again after its backoff).
    // The row is finalized a moment before BullMQ moves the job to completed and counts the run: wait for that move.
    const job = await jobReaches(app.context.queues.chain, id, 'completed');
    expect([job.attemptsMade, job.failedReason], 'one run, never failed').to.deep.equal([1, undefined]);
    await expectExactlyOnce(app.context, api, org, [id], height + 1);
  });

  it(`a batch the node lost without a word is sent again after ${SILENT_BLOCKS} blocks, not after the watch's 120 s`, async () => {
    const { org, id, height } = await oneInPool();
    const [signed] = await rows([id]);
    chain.losePool();
    expect(await api.rpc.author.pendingExtrinsics(), 'the pool lost it').to.have.length(0);
    // blocks come and go without it; the relayer sends the same bytes again (the same nonce, so at most one lands)
    for (let i = 0; i < SILENT_BLOCKS; i++) await chain.newBlock();
    await inPoolAgain();
    expect((await rows([id]))[0]!.status, 'still on its way meanwhile').to.equal('submitted');
    await chain.newBlock();
    const [landed] = await finalized([id], 'the batch in the block after the resend');
    expect(landed!.tx_hash, 'the same bytes, not signed again').to.equal(signed!.tx_hash);
    expect(Number(landed!.block_number)).to.equal(height + SILENT_BLOCKS + 1);
    await expectExactlyOnce(app.context, api, org, [id], height + 1);
  });

  /** A relayer batch of one remark signed and sent by an AnchorService of the test's own, in the pool now, and its watch. */
  const remarkInPool = async (remark: string) => {
    const anchors = new AnchorService(app.context.chains);
    const nonce = (await api.rpc.system.accountNextIndex(await relayerAddress(relayerSeed))).toNumber();
    const batch = await anchors.signBatch('testnet', [api.tx.system.remarkWithEvent(remark).method.toHex()], nonce);
    const height = await best();
    const watched = anchors.submit('testnet', batch);
    await inPoolAgain();
    return { anchors, batch, height, watched };
  };

  it(`a batch its pool holds past ${SILENT_BLOCKS} blocks (a congested chain's) is watched on, not sent again`, async () => {
    const { height, watched } = await remarkInPool('0x00');
    // blocks full of others, past the count at which the pool is asked for it, short of the next count (a pool asked
    // just as the bytes leave it for their block finds them in neither: the submitter then finds them on chain)
    const full = SILENT_BLOCKS + SILENT_BLOCKS / 2;
    for (let i = 0; i < full; i++) await chain.newBlock({ leavePool: true });
    expect(await api.rpc.author.pendingExtrinsics(), 'one copy, never sent again').to.have.length(1);
    await chain.newBlock();
    const inclusion = await watched;
    expect(inclusion.blockNumber, 'heard by the watch it was sent with').to.equal(height + full + 1);
  });

  // a Substrate node answers a submission of bytes its pool holds already with 1013 and no watch (the local chain's
  // harness too): the bytes must be followed into their block by other means
  it('bytes sent again while the pool holds them are answered "already imported", and followed into their block', async () => {
    const { anchors, batch, height, watched: first } = await remarkInPool('0x01');
    const answered = chain.alreadyImported.next();
    const again = anchors.submit('testnet', batch);
    await answered;
    // a block without it first: the resend's following goes on past it
    await chain.newBlock({ leavePool: true });
    expect(await api.rpc.author.pendingExtrinsics(), 'one copy in the pool').to.have.length(1);
    await chain.newBlock();
    const [heard, followed] = await Promise.all([first, again]);
    expect(followed.blockNumber, 'the resend found its bytes in their block').to.equal(height + 2);
    expect(followed.blockHash).to.equal(heard.blockHash);
    expect(followed.items.map((i) => i.status)).to.deep.equal(['ok']);
  });

  it('a batch sent again after its connection dropped, while the pool still holds it, lands once without being sent a third time', async () => {
    const { org, id, height } = await oneInPool();
    const answeredBefore = chain.alreadyImported.count;
    const answered = chain.alreadyImported.next();
    await chain.unreachableFor(500);
    // the watch ended with its connection; once back, the submitter sends the same bytes again: the node holds them
    await answered;
    await reconnected();
    await chain.newBlock({ leavePool: true });
    await chain.newBlock({ leavePool: true });
    expect(await api.rpc.author.pendingExtrinsics(), 'one copy, still in the pool').to.have.length(1);
    await chain.newBlock();
    const [landed] = await finalized([id], 'the batch followed into its block, recorded and finalized');
    expect(Number(landed!.block_number)).to.equal(height + 3);
    expect(chain.alreadyImported.count - answeredBefore, 'sent again once, then followed, not sent again each round').to.equal(1);
    const job = await jobReaches(app.context.queues.chain, id, 'completed');
    expect([job.attemptsMade, job.failedReason], 'one run, never failed').to.deep.equal([1, undefined]);
    await expectExactlyOnce(app.context, api, org, [id], height + 3);
  });

  // a followed resend ends as a watch does, with WatchLost: the submitter then looks for the bytes and sends them again
  const endings = {
    [`the node loses them: after ${SILENT_BLOCKS} blocks without them`]: async () => {
      chain.losePool();
      for (let i = 0; i < SILENT_BLOCKS; i++) await chain.newBlock();
    },
    'its connection drops: once it is back': () => chain.unreachableFor(500),
  };
  for (const [ending, happen] of Object.entries(endings)) {
    it(`bytes followed after "already imported" are given up on when ${ending}`, async () => {
      const { anchors, batch, watched: first } = await remarkInPool(`0x1${Object.keys(endings).indexOf(ending)}`);
      const answered = chain.alreadyImported.next();
      const again = anchors.submit('testnet', batch);
      await answered;
      await happen();
      const ended = await Promise.all(
        [first, again].map((p) =>
          p.then(
            () => undefined,
            (err: Error) => err,
          ),
        ),
      );
      expect(
        ended.map((e) => e?.name),
        'the watch it was sent with, and the following of the resend',
      ).to.deep.equal(['WatchLost', 'WatchLost']);
      await reconnected();
      // nothing of this test's left for the next: a pool that kept its copy has it carried by the next block
      await chain.newBlock();
      expect(await api.rpc.author.pendingExtrinsics()).to.have.length(0);
    });
  }
});
