import { expect } from 'chai';
import { BlockFees } from '../../shared/chain/quote';

describe('fees by block and kind of call (chain quotes)', () => {
  it('asks once per block and kind, again at a new block', async () => {
    const fees = new BlockFees();
    const asked: string[] = [];
    const ask = (answer: bigint, label: string) => () => {
      asked.push(label);
      return Promise.resolve(answer);
    };
    expect(await fees.of('0xa', 'system.remark:300', ask(10n, 'a remark'))).to.equal(10n);
    expect(await fees.of('0xa', 'system.remark:300', ask(99n, 'a remark again'))).to.equal(10n);
    expect(await fees.of('0xa', 'ats.createOnBehalf:400', ask(20n, 'a create'))).to.equal(20n);
    expect(await fees.of('0xb', 'system.remark:300', ask(11n, 'b remark'))).to.equal(11n);
    expect(await fees.of('0xb', 'ats.createOnBehalf:400', ask(21n, 'b create'))).to.equal(21n);
    expect(asked).to.deep.equal(['a remark', 'a create', 'b remark', 'b create']);
  });

  it('shares a question in flight and forgets one that failed', async () => {
    const fees = new BlockFees();
    let asks = 0;
    const failing = () => {
      asks++;
      return Promise.reject(new Error('node away'));
    };
    const first = fees.of('0xa', 'k', failing);
    const second = fees.of('0xa', 'k', failing);
    const settled = await Promise.allSettled([first, second]);
    expect(asks, 'asked once while in flight').to.equal(1);
    expect(settled.map((s) => s.status)).to.deep.equal(['rejected', 'rejected']);
    expect(await fees.of('0xa', 'k', () => Promise.resolve(5n))).to.equal(5n);
  });
});
