import type { ApiPromise } from '@polkadot/api';
import type { SubmittableExtrinsic } from '@polkadot/api/types';
import type { KeyringPair } from '@polkadot/keyring/types';

/** Share of the runtime's per-extrinsic weight and block length one batch may take. */
const BATCH_SHARE = 0.75;

/**
 * The relayer's batch of these calls: `utility.forceBatch`, or, on runtimes without it, `utility.batch`
 * (whose stopped items are sent again).
 */
export function batchOf(api: ApiPromise, callHexes: readonly string[]): SubmittableExtrinsic<'promise'> {
  const calls = callHexes.map((hex) => api.createType('Call', hex));
  return api.tx.utility.forceBatch ? api.tx.utility.forceBatch(calls) : api.tx.utility.batch(calls);
}

/**
 * How many of these calls, taken in order, one batch can carry: bounded by the utility pallet's call
 * limit and by a share of the runtime's per-extrinsic weight and block length, and by `max`.
 */
export async function fitBatch(api: ApiPromise, relayer: KeyringPair, callHexes: readonly string[], max: number): Promise<number> {
  const consts = api.consts as unknown as Record<string, Record<string, any> | undefined>;
  const callsLimit = Number(consts.utility?.batchedCallsLimit?.toString() ?? max);
  const maxWeight =
    refTime(consts.system!.blockWeights!.perClass.normal.maxExtrinsic.unwrapOr(consts.system!.blockWeights!.maxBlock)) * BATCH_SHARE;
  const maxLength = Number(consts.system!.blockLength!.max.normal.toString()) * BATCH_SHARE;
  let count = Math.min(callHexes.length, max, callsLimit);
  while (count > 1) {
    const tx = batchOf(api, callHexes.slice(0, count));
    const info = await tx.paymentInfo(relayer);
    if (refTime(info.weight) <= maxWeight && tx.encodedLength <= maxLength) break;
    count = Math.floor(count / 2);
  }
  return count;
}

/** Weight as a number of ref-time units, from a v1 (plain) or v2 ({ refTime, proofSize }) weight. */
function refTime(weight: { toJSON(): unknown } | unknown): number {
  const json = (weight as { toJSON?: () => unknown }).toJSON?.() ?? weight;
  if (typeof json === 'number' || typeof json === 'string') return Number(json);
  const v2 = json as { refTime?: number | string; ref_time?: number | string };
  return Number(v2.refTime ?? v2.ref_time ?? 0);
}
