import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { ApiPromise, Keyring, WsProvider } from '@polkadot/api';
import { call, eventually, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers, useStack } from '../helpers/workers';
import { quote, register, type Quoted } from '../helpers/registration';
import { AnchorService } from '../../shared/chain/anchors';
import { remarkCall, remarkDialect } from '../../shared/chain/dialects/remark';
import { PAYLOAD_LENGTH } from '../../shared/chain/remark-payload';
import { u8aToHex } from '@polkadot/util';
import { batchOf, callsOfBatch, fitBatch, refusedAsTooLarge } from '../../shared/chain/batch';
import { advanceTransaction, prepareCall } from '../../shared/transactions/pipeline';
import { RelayerSubmitter } from '../../shared/transactions/submitter';
import { findTransaction } from '../../shared/transactions/repo';

/** Runs `fn` over `items`, at most `limit` at a time. */
async function inBatches<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += limit) out.push(...(await Promise.all(items.slice(i, i + limit).map(fn))));
  return out;
}

describe('batched submission through one relayer submitter', function () {
  this.timeout(300_000);
  // no chain worker in this stack: each test decides when, and how, the chain side runs
  const stack = useStack({ env: { REDIS_PREFIX: `batching_${Date.now()}` }, queues: ['prepare'] });
  let app: TestApp;
  let api: ApiPromise;
  before(async () => {
    app = stack.app;
    api = await ApiPromise.create({ provider: new WsProvider(stack.config.chains[0]!.wsUrl), noInitWarn: true });
  });
  after(() => api.disconnect());

  it('finalizes 50 registrations confirmed at once in a handful of blocks, each charged once', async () => {
    const org = await createOrg(app.context, 1_000_000);
    const key = await createKey(app.context, org);
    const quotes = await inBatches(
      Array.from({ length: 50 }, (_, i) => i),
      10,
      () => quote(app.url, key.token),
    );
    const confirms = await Promise.all(
      quotes.map((q: Quoted) => call(app.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: q.jobId } })),
    );
    expect(confirms.map((c) => c.status)).to.deep.equal(Array(50).fill(202));
    const ids = confirms.map((c) => c.body.transaction_id as string);

    const startBlock = (await api.rpc.chain.getHeader()).number.toNumber();
    const workers = await startTestWorkers(stack.config, ['chain']);
    try {
      await eventually(
        async () => {
          const done = await app.context
            .db('transactions')
            .whereIn('id', ids)
            .where({ status: 'finalized' })
            .count<{ count: string }[]>('* as count');
          return Number(done[0]!.count) === 50 ? true : undefined;
        },
        '50 finalized transactions',
        240_000,
      );
    } finally {
      await workers.stop();
    }
    const rows = await app.context.db('transactions').whereIn('id', ids).select('submission_id', 'block_number', 'tx_hash');
    const extrinsics = new Set(rows.map((r) => r.tx_hash)).size;
    const blocks = new Set(rows.map((r) => r.block_number)).size;
    const endBlock = (await api.rpc.chain.getHeader()).number.toNumber();
    process.stdout.write(
      `      50 registrations: ${extrinsics} relayer extrinsics in ${blocks} blocks (chain advanced ${endBlock - startBlock} blocks)\n`,
    );
    expect(extrinsics, 'registrations share batches').to.be.below(50);
    expect(blocks).to.be.at.most(extrinsics); // at most one relayer batch is signed per block
    // every batch is on chain, holding exactly the calls the index says it holds
    for (const hash of new Set(rows.map((r) => r.tx_hash as string))) {
      const submission = await app.context.db('chain_submissions').where({ tx_hash: hash }).first();
      const block = await api.rpc.chain.getBlock(submission.block_hash);
      const extrinsic = block.block.extrinsics[submission.extrinsic_index]!;
      expect(extrinsic.hash.toHex()).to.equal(hash);
      expect((extrinsic.method.args[0] as unknown as unknown[]).length).to.equal(submission.items);
    }
    expect(await app.context.db('works').where({ organization_id: org }).count<{ count: string }[]>('* as count')).to.deep.equal([
      { count: '50' },
    ]);
    const ledger = await app.context
      .db('credit_ledger')
      .where({ organization_id: org })
      .whereIn('reference', ids)
      .select('kind', 'reference');
    expect(ledger.map((e) => e.kind)).to.deep.equal(Array(50).fill('debit'));
    expect(new Set(ledger.map((e) => e.reference)).size).to.equal(50);
  });

  it('fails one bad item of a batch alone, refunded; the others finalize', async () => {
    const org = await createOrg(app.context, 10_000);
    const key = await createKey(app.context, org);
    const regs = [];
    for (let i = 0; i < 3; i++) regs.push(await register(app.url, key.token));
    const ids = regs.map((r) => r.confirm.body.transaction_id as string);
    const anchors = new AnchorService(app.context.chains);
    const deps = { app: app.context, anchors, submitter: new RelayerSubmitter(app.context, anchors) };
    for (const id of ids) await prepareCall(deps, (await findTransaction(app.context.db, id))!);
    // Fault injection: the middle call becomes one the runtime refuses (a transfer far beyond the relayer's funds).
    const bad = api.tx.balances.transferKeepAlive('5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY', 10n ** 30n).method.toHex();
    await app.context.db('transactions').where({ id: ids[1] }).update({ call_hex: bad });

    await deps.submitter.drain('testnet');
    const first = await app.context
      .db('transactions')
      .whereIn('id', ids)
      .select('id', 'submission_id', 'batch_index', 'status', 'result', 'signings');
    const byId = new Map(first.map((r) => [r.id as string, r]));
    const batch = await app.context
      .db('chain_submissions')
      .where({ id: byId.get(ids[0]!)!.submission_id })
      .first();
    expect(batch.items).to.be.at.least(3); // the three rode one batch (with anything else that was ready)
    expect(byId.get(ids[1]!)).to.deep.include({ status: 'failed', submission_id: batch.id });
    expect(byId.get(ids[1]!)!.result.error.code).to.equal('chain.extrinsic_failed');
    expect(byId.get(ids[1]!)!.result.error.message).to.match(/balances\./);

    for (const id of [ids[0]!, ids[2]!]) expect((await advanceTransaction(deps, id)).status).to.equal('finalized');
    // a plain utility.batch stops at the failure: the item after it went out again in the next batch
    const third = await app.context.db('transactions').where({ id: ids[2] }).first();
    if ('forceBatch' in api.tx.utility) expect(third.submission_id).to.equal(batch.id);
    else expect([third.submission_id !== batch.id, third.signings]).to.deep.equal([true, 2]);

    const ledger = await app.context
      .db('credit_ledger')
      .where({ organization_id: org })
      .whereIn('reference', ids)
      .orderBy('id')
      .select('kind', 'reference');
    expect(ledger.filter((e) => e.kind === 'refund').map((e) => e.reference)).to.deep.equal([ids[1]]);
    expect(ledger.filter((e) => e.kind === 'debit')).to.have.length(3);
    expect(await app.context.db('works').where({ organization_id: org }).pluck('id')).to.have.members([regs[0]!.jobId, regs[2]!.jobId]);
  });

  it('bounds a batch by the runtime block length', async () => {
    const anchors = new AnchorService(app.context.chains);
    const maxLength = Number(api.consts.system.blockLength.max.normal.toString());
    const big = api.tx.system.remark(`0x${'ab'.repeat(1_000_000)}`).method.toHex();
    const fits = await anchors.fitBatch('testnet', Array(10).fill(big), 100);
    expect(fits * 1_000_000).to.be.at.most(maxLength * 0.75);
    expect(fits).to.be.at.least(1);
    const small = api.tx.system.remark('0x01').method.toHex();
    expect(await anchors.fitBatch('testnet', Array(10).fill(small), 4)).to.equal(4); // small calls: the configured maximum
  });
  it("asks the runtime for a batch's weight only when no batch seen before covers it, first about the kind's largest", async () => {
    // this test's own connection: what it learns is its own (the service's connection has its own memory)
    const weightAsked: number[] = [];
    const provider = (api as unknown as { _rpcCore: { provider: { send: (method: string, params: unknown[]) => Promise<unknown> } } })
      ._rpcCore.provider;
    const send = provider.send.bind(provider);
    provider.send = (method, params, ...rest: unknown[]) => {
      if (method === 'payment_queryInfo' || (method === 'state_call' && String(params[0]).startsWith('TransactionPaymentApi'))) {
        // the asked extrinsic's length, hex digits over two: which batch was asked about
        weightAsked.push(String(params[1]).length / 2);
      }
      return (send as (...args: unknown[]) => Promise<unknown>)(method, params, ...rest);
    };
    try {
      const relayer = new Keyring({ type: 'sr25519' }).addFromUri('//Alice');
      const remark = (bytes: number) => api.tx.system.remark(`0x${'cd'.repeat(bytes)}`).method.toHex();
      const asked = async (callHexes: string[], max = 100) => {
        const before = weightAsked.length;
        const count = await fitBatch(api, relayer, callHexes, max);
        return { count, asked: weightAsked.length - before };
      };
      // a kind's first question is about its largest batch: `max` copies of the longest call, which covers this one
      expect(await asked([remark(100), remark(40), remark(100)])).to.deep.equal({ count: 3, asked: 1 });
      expect(weightAsked.at(-1), 'the largest batch asked about').to.be.above(100 * 100);
      // covered by it: as many calls or fewer, as many bytes or fewer, of the same kind, up to `max`
      expect(await asked(Array(8).fill(remark(100)))).to.deep.equal({ count: 8, asked: 0 });
      expect(await asked(Array(100).fill(remark(100)))).to.deep.equal({ count: 100, asked: 0 });
      expect(await asked(Array(150).fill(remark(60)))).to.deep.equal({ count: 100, asked: 0 });
      // not covered: more bytes than any batch asked about, more calls than it (a larger max), another kind, kinds
      // mixed; each asked alone (the largest of a kind is asked about once), then remembered
      expect(await asked(Array(100).fill(remark(200)))).to.deep.equal({ count: 100, asked: 1 });
      expect(await asked(Array(60).fill(remark(300)))).to.deep.equal({ count: 60, asked: 0 });
      expect(await asked(Array(101).fill(remark(100)), 200)).to.deep.equal({ count: 101, asked: 1 });
      expect(await asked(Array(101).fill(remark(100)), 200)).to.deep.equal({ count: 101, asked: 0 });
      const other = api.tx.balances.transferKeepAlive(relayer.address, 1).method.toHex();
      expect(await asked([other, other])).to.deep.equal({ count: 2, asked: 1 });
      expect(await asked(Array(100).fill(other))).to.deep.equal({ count: 100, asked: 0 });
      expect(await asked([remark(1), other])).to.deep.equal({ count: 2, asked: 1 });
      expect(await asked([remark(1), other])).to.deep.equal({ count: 2, asked: 1 });
      // a kind of long calls: its largest is as many as the block length holds (found without asking), asked once
      const longer = api.tx.system.remarkWithEvent(`0x${'ab'.repeat(400_000)}`).method.toHex();
      expect(await asked([longer, longer])).to.deep.equal({ count: 2, asked: 1 });
      const most = await asked(Array(10).fill(longer));
      expect(most).to.deep.include({ asked: 0 });
      expect(most.count).to.be.within(3, 9);
      // a kind too heavy for its largest (the utility pallet's 10,922 calls): asked once more, about as many as that
      // answer says fit, which covers the batches after; a batch too heavy of its own is cut the same way
      const heavy = api.tx.balances.transfer!(relayer.address, 1).method.toHex();
      expect(await asked([heavy, heavy], 100_000)).to.deep.equal({ count: 2, asked: 2 });
      const heaviest = await asked(Array(20_000).fill(heavy), 100_000);
      expect(heaviest.asked).to.equal(1);
      expect(heaviest.count).to.be.within(100, 10_000);
      expect(await asked(Array(heaviest.count).fill(heavy), 100_000)).to.deep.equal({ count: heaviest.count, asked: 0 });
      // a batch over the block length is halved without asking; the part that fits is asked once, then remembered
      const long = api.tx.system.remark(`0x${'ef'.repeat(1_000_000)}`).method.toHex();
      const first = await asked(Array(10).fill(long));
      expect(first.count).to.be.within(2, 9);
      expect(first.asked).to.equal(1);
      expect(await asked(Array(10).fill(long))).to.deep.equal({ count: first.count, asked: 0 });
    } finally {
      provider.send = send;
    }
  });

  it('carries fewer calls of a kind in a batch once the node refused one of that kind as too large, halving at each refusal', async () => {
    // a connection of this test's own: what a refusal teaches is kept per connection
    const own = await ApiPromise.create({ provider: new WsProvider(stack.config.chains[0]!.wsUrl), noInitWarn: true });
    try {
      const relayer = new Keyring({ type: 'sr25519' }).addFromUri('//Alice');
      const remarks = Array(40).fill(own.tx.system.remark(`0x${'cd'.repeat(50)}`).method.toHex());
      const other = own.tx.system.remarkWithEvent('0x01').method.toHex();
      const third = own.tx.balances.transferKeepAlive(relayer.address, 1).method.toHex();
      const fit = (calls: string[]) => fitBatch(own, relayer, calls, 100);
      expect(await fit(remarks), 'the runtime says 40 fit').to.equal(40);
      // a batch's calls, as the submitter reads them back from the refused bytes
      expect(callsOfBatch(own, batchOf(own, remarks).toHex())).to.deep.equal(remarks);

      expect(refusedAsTooLarge(own, remarks)).to.equal(20);
      expect(await fit(remarks), 'the refusal outranks the runtime').to.equal(20);
      expect(await fit(remarks.slice(0, 12)), 'fewer than the most: all of them').to.equal(12);
      expect(await fit([other, other, other]), 'another kind: untouched').to.equal(3);
      // refused again at that size: halved again, down to one call, which always goes
      expect(refusedAsTooLarge(own, remarks.slice(0, 20))).to.equal(10);
      expect(await fit(remarks)).to.equal(10);
      expect(refusedAsTooLarge(own, remarks.slice(0, 3))).to.equal(1);
      expect(refusedAsTooLarge(own, remarks.slice(0, 1))).to.equal(1);
      expect(await fit(remarks)).to.equal(1);
      // a larger batch refused later never raises the most
      expect(refusedAsTooLarge(own, remarks)).to.equal(1);
      // a batch mixing kinds carries no more than the least of its kinds may; a refusal of kinds mixed holds them alone
      expect(await fit([remarks[0]!, other, other]), 'mixed with the refused kind').to.equal(1);
      expect(await fit([other, third, other, third]), 'kinds mixed, none refused').to.equal(4);
      expect(refusedAsTooLarge(own, [other, third, other, third])).to.equal(2);
      expect(await fit([other, third, other, third])).to.equal(2);
      expect(await fit([other, other, other]), 'each kind alone: untouched').to.equal(3);
      expect(await fit([third, third, third])).to.equal(3);
      // another connection learned none of it
      expect(await fitBatch(api, relayer, remarks, 100)).to.equal(40);
    } finally {
      await own.disconnect();
    }
  });

  it('quotes an anchor ahead of its commitment: the same fee and verdict as the call over the real one', async () => {
    const anchors = new AnchorService(app.context.chains);
    const network = stack.config.chains[0]!.network;
    const ownerSeed = randomBytes(32);
    const request = { action: 'register' as const, network, protocolVersion: 1, atsId: 0n, version: 1 };
    // the remark dialect's chain reads nothing the owner signs: a quote ahead never asks for the seed
    const seedsLent: Buffer[] = [];
    const lend = <T>(use: (seed: Buffer) => Promise<T>) => (seedsLent.push(ownerSeed), use(ownerSeed));
    const [ahead, real] = await Promise.all([
      anchors.quoteAhead(network, request, lend),
      anchors.quote(network, { ...request, ownerSeed, commitment: randomBytes(32) }),
    ]);
    expect(real.dryRun).to.deep.equal({ ok: true });
    expect(ahead).to.deep.equal(real);
    // the quote's call is the signed one's kind and length; either is what the API's builder makes of its remark
    const remarkOf = (hex: string) => api.createType('Call', hex).args[0]!.toU8a(true);
    const signed = await remarkDialect.buildCall(api, { ...request, ownerSeed, commitment: randomBytes(32) }, '');
    const unsigned = remarkDialect.quoteCall!(api, { ...request, commitment: randomBytes(32) });
    expect([unsigned.length, remarkOf(unsigned).length]).to.deep.equal([signed.length, PAYLOAD_LENGTH]);
    // and remarks of every width of their length's compact
    const remarks = [remarkOf(signed), remarkOf(unsigned), ...[0, 1, 63, 64, 16_383, 16_384].map((n) => new Uint8Array(n).fill(0x5a))];
    for (const remark of remarks) expect(remarkCall(api, remark)).to.equal(api.tx.system.remarkWithEvent(u8aToHex(remark)).method.toHex());
    const update = { ...request, action: 'update' as const, atsId: 7n, version: 2 };
    expect(await anchors.quoteAhead(network, update, lend)).to.deep.equal(
      await anchors.quote(network, { ...update, ownerSeed, commitment: randomBytes(32) }),
    );
    expect(seedsLent).to.deep.equal([]);
  });

  it('judges quotes that wait for the chain together in one dry run, and a failing call alone with its own reason', async () => {
    const anchors = new AnchorService(app.context.chains);
    const network = stack.config.chains[0]!.network;
    const chain = await app.context.chains.api(network);
    // counts the service's dry-run round trips to the node
    const counted = anchors as unknown as { dryRun: (...args: unknown[]) => Promise<unknown> };
    const dryRun = counted.dryRun.bind(anchors);
    let dryRuns = 0;
    counted.dryRun = (...args) => {
      dryRuns++;
      return dryRun(...args);
    };
    const remarks = ['0x01', '0x02', '0x03'].map((bytes) => chain.tx.system.remark(bytes).method.toHex());
    const good = await Promise.all(remarks.map((hex) => anchors.judgeCall(network, hex)));
    expect(good.map((v) => v.dryRun)).to.deep.equal([{ ok: true }, { ok: true }, { ok: true }]);
    expect(new Set(good.map((v) => v.feePlanck)).size, 'calls of one kind and length cost the same').to.equal(1);
    expect(good[0]!.feePlanck > 0n).to.equal(true);
    expect(dryRuns, 'three quotes asked at once: the first alone, the two that waited for it together').to.equal(2);

    // a call only root may make fails its dry run; the ones asked with it still pass
    const rootOnly = chain.tx.system.setStorage([]).method.toHex();
    dryRuns = 0;
    const mixed = await Promise.all([remarks[0]!, rootOnly, remarks[1]!].map((hex) => anchors.judgeCall(network, hex)));
    expect(mixed.map((v) => v.dryRun)).to.deep.equal([{ ok: true }, { ok: false, reason: 'dispatch failed: BadOrigin' }, { ok: true }]);
    expect(dryRuns, 'the first alone; the pair that waited, then each of its halves').to.equal(4);
  });
  it('looks through each finalized block once for a batch not found: the next look reads only the blocks after', async () => {
    const anchors = new AnchorService(app.context.chains);
    // the service's own connection, which AnchorService reads blocks through: the heights it looks through counted
    // (the hash at each is asked; the block itself may be one of those read last, shared/chain/inclusion.ts)
    const provider = (
      (await app.context.chains.api('testnet')) as unknown as {
        _rpcCore: { provider: { send: (method: string, params: unknown[], ...rest: unknown[]) => Promise<unknown> } };
      }
    )._rpcCore.provider;
    const send = provider.send.bind(provider);
    let blocksRead = 0;
    provider.send = (method, params, ...rest) => {
      if (method === 'chain_getBlockHash') blocksRead++;
      return send(method, params, ...rest);
    };
    const read = async (look: () => Promise<unknown>) => {
      blocksRead = 0;
      const found = await look();
      return { found, blocksRead };
    };
    try {
      // blocks to look through: a few remarks, each in a block of its own
      const relayer = new Keyring({ type: 'sr25519' }).addFromUri(stack.config.chains[0]!.relayerSeed);
      for (let i = 0; i < 3; i++) await api.tx.system.remark(u8aToHex(randomBytes(8))).signAndSend(relayer, { nonce: -1 });
      const best = await eventually(async () => {
        const n = (await api.rpc.chain.getHeader()).number.toNumber();
        return n >= 3 ? n : undefined;
      }, 'three blocks');
      const finalized = (await api.rpc.chain.getHeader(await api.rpc.chain.getFinalizedHead())).number.toNumber();
      const absent = u8aToHex(randomBytes(32));
      const from = best - 3;
      const first = await read(() => anchors.find('testnet', absent, from));
      expect(first.found).to.equal(undefined);
      expect(first.blocksRead, 'every block from the batch’s birth').to.be.at.least(best - from + 1);
      const second = await read(() => anchors.find('testnet', absent, from));
      const bestAfter = (await api.rpc.chain.getHeader()).number.toNumber();
      expect(second.found).to.equal(undefined);
      expect(second.blocksRead, `the blocks after the finalized ${finalized} only`).to.be.at.most(
        bestAfter - Math.max(finalized, from - 1),
      );
      expect(second.blocksRead).to.be.below(first.blocksRead);
      // an extrinsic that is there is still found, however often it was looked for before
      // (the newest of the remarks' blocks: on a chain that builds a block per extrinsic, one block may carry all three)
      let there: { hash: string; height: number } | undefined;
      for (let height = best; !there && height >= from; height--) {
        const block = await api.rpc.chain.getBlock(await api.rpc.chain.getBlockHash(height));
        const signed = block.block.extrinsics.find((x) => x.isSigned);
        if (signed) there = { hash: signed.hash.toHex(), height };
      }
      expect(there, 'a signed extrinsic in the blocks looked through').to.not.equal(undefined);
      const found = (await anchors.find('testnet', there!.hash, there!.height)) as { blockNumber: number } | undefined;
      expect(found?.blockNumber).to.equal(there!.height);
    } finally {
      provider.send = send;
    }
  });
});
