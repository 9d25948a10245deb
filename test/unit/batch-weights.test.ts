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

  it("fits only within both parts, the extrinsic's length counted in its proof; a weight without a proof size is held to its ref time", () => {
    expect(fits({ refTime: 1_000, proofSize: 400 }, 100, limits)).to.equal(true);
    expect(fits({ refTime: 1_000, proofSize: 400 }, 101, limits), 'over the proof size by its length').to.equal(false);
    expect(fits({ refTime: 900, proofSize: 501 }, 0, limits), 'over the proof size alone').to.equal(false);
    expect(fits({ refTime: 1_001, proofSize: 10 }, 0, limits), 'over the ref time alone').to.equal(false);
    expect(fits({ refTime: 1_000 }, 10 ** 6, limits), 'weights v1: no proof').to.equal(true);
    expect(fits({ refTime: 1_000, proofSize: 10 ** 12 }, 0, { weight: 1_000, proof: Infinity }), 'no proof limit').to.equal(true);
  });

  it('cuts a batch too heavy by the part it is most over, to one call at least, never to nothing or NaN', () => {
    // 100 calls: twice the ref time, four times the proof size: a quarter of them, a little under
    expect(asManyAsFit(100, { refTime: 2_000, proofSize: 1_900 }, 100, limits)).to.equal(24);
    expect(asManyAsFit(100, { refTime: 4_000, proofSize: 1_000 }, 0, limits)).to.equal(24);
    expect(asManyAsFit(100, { refTime: 2_000 }, 0, limits)).to.equal(49);
    // a runtime whose limits carry no proof size (weights v2 made from a ref time alone): a batch of no proof is over
    // its ref time alone; one of some proof, over a limit of nothing, goes one call at a time
    expect(asManyAsFit(100, { refTime: 2_000, proofSize: 0 }, 0, { weight: 1_000, proof: 0 })).to.equal(49);
    expect(asManyAsFit(100, { refTime: 2_000, proofSize: 10 }, 0, { weight: 1_000, proof: 0 })).to.equal(1);
    expect(asManyAsFit(100, { refTime: 10 ** 9 }, 0, limits)).to.equal(1);
  });
});
