import { expect } from 'chai';
import { asManyAsFit, fits, weightParts } from '../../shared/chain/batch';

/**
 * A batch's weight against the runtime's per-extrinsic limits: a node refuses an extrinsic over either part of a v2
 * weight (ref time, proof size), so the batch fitter weighs both when the runtime's weights have them.
 */
describe("a relayer batch's weight, both parts", () => {
  const codec = (json: unknown) => ({ toJSON: () => json });
  const limits = { weight: 1_000, proof: 500 };

  it('reads a v1 weight (ref time alone) and a v2 weight (ref time and proof size), in either spelling', () => {
    expect(weightParts(codec(1234))).to.deep.equal({ refTime: 1234 });
    expect(weightParts(codec('0x10'))).to.deep.equal({ refTime: 16 });
    expect(weightParts(codec({ refTime: 7, proofSize: 9 }))).to.deep.equal({ refTime: 7, proofSize: 9 });
    expect(weightParts(codec({ ref_time: '7', proof_size: '9' }))).to.deep.equal({ refTime: 7, proofSize: 9 });
  });

  it('fits only within both parts; a weight without a proof size is held to its ref time', () => {
    expect(fits({ refTime: 1_000, proofSize: 500 }, limits)).to.equal(true);
    expect(fits({ refTime: 900, proofSize: 501 }, limits), 'over the proof size alone').to.equal(false);
    expect(fits({ refTime: 1_001, proofSize: 10 }, limits), 'over the ref time alone').to.equal(false);
    expect(fits({ refTime: 1_000 }, limits)).to.equal(true);
    expect(fits({ refTime: 1_000, proofSize: 10 ** 12 }, { weight: 1_000, proof: Infinity }), 'no proof limit (weights v1)').to.equal(true);
  });

  it('cuts a batch too heavy by the part it is most over', () => {
    // 100 calls: twice the ref time, four times the proof size: a quarter of them, a little under
    expect(asManyAsFit(100, { refTime: 2_000, proofSize: 2_000 }, limits)).to.equal(24);
    expect(asManyAsFit(100, { refTime: 4_000, proofSize: 1_000 }, limits)).to.equal(24);
    expect(asManyAsFit(100, { refTime: 2_000 }, limits)).to.equal(49);
  });
});
