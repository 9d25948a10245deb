import { expect } from 'chai';
import type { ApiPromise } from '@polkadot/api';
import { remarksOf, type CallLike } from '../../shared/chain/verify';
import { decodeAnchor } from '../../shared/chain/remark-payload';
import type { Resources } from '../../shared/resources';
import { eventually } from './app';

/** ats_ids of every works-api anchor in blocks from..to of the chain behind `api`, one entry per anchor. */
export async function anchoredAtsIds(api: ApiPromise, from: number, to: number): Promise<number[]> {
  const ids: number[] = [];
  for (let n = from; n <= to; n++) {
    const block = await api.rpc.chain.getBlock(await api.rpc.chain.getBlockHash(n));
    for (const extrinsic of block.block.extrinsics) {
      for (const bytes of remarksOf(extrinsic.method as unknown as CallLike)) {
        try {
          ids.push(Number(decodeAnchor(bytes).atsId));
        } catch {
          // not a works-api anchor
        }
      }
    }
  }
  return ids;
}

/** Every transaction finalized, one work each, one debit each, no refund, each anchor exactly once on chain. */
export async function expectExactlyOnce(ctx: Resources, api: ApiPromise, org: string, ids: string[], fromBlock: number): Promise<void> {
  await eventually(
    async () => {
      const done = await ctx.db('transactions').whereIn('id', ids).where({ status: 'finalized' }).count<{ count: string }[]>('* as count');
      return Number(done[0]!.count) === ids.length ? true : undefined;
    },
    `${ids.length} finalized transactions`,
    120_000,
  );
  const rows = await ctx.db('transactions').whereIn('id', ids).select('ats_id');
  expect(await ctx.db('works').where({ organization_id: org }).count<{ count: string }[]>('* as count')).to.deep.equal([
    { count: String(ids.length) },
  ]);
  const ledger = await ctx.db('credit_ledger').where({ organization_id: org }).whereIn('reference', ids).select('kind');
  expect(ledger.map((e) => e.kind)).to.deep.equal(Array(ids.length).fill('debit'));
  const onChain = await anchoredAtsIds(api, fromBlock, (await api.rpc.chain.getHeader()).number.toNumber());
  for (const { ats_id } of rows)
    expect(
      onChain.filter((id) => id === Number(ats_id)),
      `anchors of ats_id ${ats_id}`,
    ).to.have.length(1);
}
