/**
 * Consecutive nonces against a chain that takes each only once and in order: the relayer's own (its
 * batches), and the owner nonces of the `ats` dialect, by one rule: the first free from the chain's value,
 * after what is already on its way without a hole.
 *
 * Owner nonces of the `ats` dialect. The ATS pallet accepts an on-behalf call only when the nonce the owner
 * signed equals `ats.onBehalfNonce(owner)` at that moment, then bumps it (a mismatch is the call's
 * `ats.InvalidNonce` dispatch error). Calls of one owner in flight together must therefore carry
 * consecutive nonces, in the order they will be applied, starting from the chain's.
 *
 * The submitter asks, under the relayer's lock (the one that serialises the relayer's nonce), for the
 * nonces of an owner's calls about to be batched, giving the chain's value and the nonces its calls still
 * on their way carry (signed into a batch, not yet in a block). The calls on their way that continue the
 * chain's value without a hole keep their nonces; the new calls follow them. A call on their way past a hole
 * (a call before it was dropped, or expired and re-signed) can no longer match: it is `doomed`, will fail in
 * its block with `ats.InvalidNonce`, and is then signed again with a nonce given here (the submitter treats
 * that dispatch error as passing). A reorg that takes a call out of a block lowers the chain's value and
 * puts the call back on its way: the same rule then holds.
 */
export interface AllocatedNonces {
  /** The nonces to sign the new calls with, in order. */
  readonly nonces: readonly bigint[];
  /** Nonces on their way that can never match (past a hole, or below the chain's value). */
  readonly doomed: readonly bigint[];
}

export function allocateNonces(chainNonce: bigint, onTheirWay: readonly bigint[], count: number): AllocatedNonces {
  const pending = new Set(onTheirWay);
  let next = chainNonce;
  while (pending.has(next)) next++;
  const doomed = [...pending].filter((n) => n < chainNonce || n > next).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return { nonces: Array.from({ length: count }, (_, i) => next + BigInt(i)), doomed };
}
