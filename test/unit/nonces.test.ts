import { expect } from 'chai';
import { allocateNonces } from '../../shared/chain/nonces';

/** The ATS pallet's rule, simulated: an on-behalf call applies only with the owner's current nonce, then bumps it. */
class SimulatedPallet {
  nonce = 0n;
  private readonly history: bigint[] = [];
  apply(nonce: bigint): boolean {
    if (nonce !== this.nonce) return false; // ats.InvalidNonce
    this.history.push(nonce);
    this.nonce++;
    return true;
  }
  /** A reorg takes the last `n` applied calls out of the chain. */
  retract(n: number): void {
    this.history.splice(-n);
    this.nonce -= BigInt(n);
  }
}

interface Call {
  readonly id: number;
  nonce?: bigint;
  state: 'ready' | 'on_their_way' | 'included';
  signatures: number;
  /** The nonce it was included with, and what the pallet expected then. */
  includedWith?: { signed: bigint; expected: bigint };
}

type Fate = 'include' | 'drop' | 'expire';

/**
 * The submitter's part, simulated: each round signs every ready call with the allocator's nonces (as the
 * real one does under the relayer's lock) into batches of `batchSize`, then the chain takes the oldest batch
 * as `fate` says. A call failing with InvalidNonce, or in a batch dropped or expired, goes back to be signed.
 */
function run(
  callCount: number,
  batchSize: number,
  fate: (batchNumber: number) => Fate,
  onIncluded?: (pallet: SimulatedPallet, batch: Call[], n: number) => Call[],
) {
  const pallet = new SimulatedPallet();
  const calls: Call[] = Array.from({ length: callCount }, (_, id) => ({ id, state: 'ready', signatures: 0 }));
  const batches: Call[][] = [];
  let delivered = 0;
  for (let round = 0; calls.some((c) => c.state !== 'included'); round++) {
    if (round > 1000) throw new Error('no progress');
    const ready = calls.filter((c) => c.state === 'ready');
    if (ready.length) {
      const onTheirWay = calls.filter((c) => c.state === 'on_their_way').map((c) => c.nonce!);
      const { nonces } = allocateNonces(pallet.nonce, onTheirWay, ready.length);
      ready.forEach((c, i) => Object.assign(c, { nonce: nonces[i], state: 'on_their_way', signatures: c.signatures + 1 }));
      for (let i = 0; i < ready.length; i += batchSize) batches.push(ready.slice(i, i + batchSize));
    }
    const batch = batches.shift();
    if (!batch) continue;
    const n = delivered++;
    const what = fate(n);
    if (what !== 'include') {
      for (const c of batch) c.state = 'ready'; // dropped by the pool, or its era ended unincluded: signed afresh
      continue;
    }
    for (const c of batch) {
      const expected = pallet.nonce;
      if (pallet.apply(c.nonce!)) Object.assign(c, { state: 'included', includedWith: { signed: c.nonce!, expected } });
      else c.state = 'ready'; // ats.InvalidNonce: passing, signed again
    }
    const retracted = onIncluded?.(pallet, batch, n) ?? [];
    for (const c of retracted) Object.assign(c, { state: 'on_their_way', includedWith: undefined });
    if (retracted.length) batches.unshift(retracted); // the same bytes are looked for, then sent again
  }
  return { pallet, calls };
}

function expectEveryCallOnce(calls: Call[], pallet: SimulatedPallet) {
  expect(calls.every((c) => c.state === 'included')).to.equal(true);
  for (const c of calls) expect(c.includedWith!.signed, `call ${c.id}`).to.equal(c.includedWith!.expected);
  expect(pallet.nonce).to.equal(BigInt(calls.length));
  expect(new Set(calls.map((c) => c.includedWith!.signed)).size).to.equal(calls.length);
}

describe('ats owner nonces', () => {
  it('hands out consecutive nonces from the chain’s value, after the calls already on their way', () => {
    expect(allocateNonces(5n, [], 3)).to.deep.equal({ nonces: [5n, 6n, 7n], doomed: [] });
    expect(allocateNonces(5n, [5n, 6n], 2)).to.deep.equal({ nonces: [7n, 8n], doomed: [] });
    // a hole at 6 (a call dropped): 7 and 8 can never apply; new calls fill from 6
    expect(allocateNonces(5n, [5n, 7n, 8n], 1)).to.deep.equal({ nonces: [6n], doomed: [7n, 8n] });
    // below the chain's value (included by another copy, or taken): doomed too
    expect(allocateNonces(5n, [3n, 5n], 1)).to.deep.equal({ nonces: [6n], doomed: [3n] });
  });

  it('50 calls of one owner in flight across 3 batches: each applies with the nonce the pallet expects', () => {
    const { pallet, calls } = run(50, 20, () => 'include');
    expectEveryCallOnce(calls, pallet);
    expect(calls.every((c) => c.signatures === 1)).to.equal(true);
  });

  it('a batch in the middle dropped: the later batch fails on the hole and every call is signed again over the right nonce', () => {
    const { pallet, calls } = run(50, 20, (n) => (n === 1 ? 'drop' : 'include'));
    expectEveryCallOnce(calls, pallet);
    // the dropped batch's 20 calls and the 10 after the hole were signed twice; the first 20 once
    expect(calls.filter((c) => c.signatures === 1)).to.have.length(20);
    expect(calls.filter((c) => c.signatures === 2)).to.have.length(30);
  });

  it('an era that ends with a batch unincluded: fresh owner signatures over the right nonces', () => {
    const { pallet, calls } = run(50, 20, (n) => (n === 0 ? 'expire' : 'include'));
    expectEveryCallOnce(calls, pallet);
    expect(Math.max(...calls.map((c) => c.signatures))).to.be.at.most(2);
  });

  it('a reorg that takes an included batch out: it is sent again and applies once, the others follow', () => {
    let reorged = false;
    const { pallet, calls } = run(
      50,
      20,
      () => 'include',
      (p, batch, n) => {
        if (n !== 0 || reorged) return [];
        reorged = true;
        p.retract(batch.length);
        return batch;
      },
    );
    expectEveryCallOnce(calls, pallet);
  });

  it('drops, expiries and reorgs at random: every call applies once, with the nonce the pallet expects', () => {
    for (let seed = 1; seed <= 200; seed++) {
      let state = seed;
      const random = () => (state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
      const { pallet, calls } = run(
        50,
        7,
        () => (random() < 0.15 ? 'drop' : random() < 0.1 ? 'expire' : 'include'),
        (p, batch) => {
          if (random() >= 0.1) return [];
          const applied = batch.filter((c) => c.state === 'included');
          p.retract(applied.length);
          return applied;
        },
      );
      expectEveryCallOnce(calls, pallet);
    }
  });
});
