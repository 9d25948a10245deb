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

/** A batch of one kind of call the runtime took: a batch of that kind, no more calls and no more bytes, fits too. */
interface Fitted {
  readonly count: number;
  readonly bytes: number;
}

/** Per connection, per runtime version and kind of call: the batches seen to fit that no other one covers. */
const fitted = new WeakMap<ApiPromise, Map<string, Fitted[]>>();
/** How many such batches are kept per kind (the newest). */
const FITTED_KEPT = 8;

/**
 * How many of these calls, taken in order, one batch can carry: bounded by the utility pallet's call
 * limit and by a share of the runtime's per-extrinsic weight and block length, and by `max`.
 *
 * The length is the extrinsic's own; the weight is the runtime's answer (`paymentInfo`), asked only when no
 * batch seen before covers this one: a batch of calls all of one kind (the same pallet and call index) weighs
 * no more than a batch of that kind, under the same runtime version, with at least as many calls and at least
 * as many bytes of calls, since each call's weight grows with its length. That answer cost each round of the
 * submitter 100–150 ms of the node's time (`docs/performance.md`); a batch mixing kinds is always asked.
 */
export async function fitBatch(api: ApiPromise, relayer: KeyringPair, callHexes: readonly string[], max: number): Promise<number> {
  const consts = api.consts as unknown as Record<string, Record<string, any> | undefined>;
  const callsLimit = Number(consts.utility?.batchedCallsLimit?.toString() ?? max);
  const maxWeight =
    refTime(consts.system!.blockWeights!.perClass.normal.maxExtrinsic.unwrapOr(consts.system!.blockWeights!.maxBlock)) * BATCH_SHARE;
  const maxLength = Number(consts.system!.blockLength!.max.normal.toString()) * BATCH_SHARE;
  const seen = fitted.get(api) ?? fitted.set(api, new Map()).get(api)!;
  let count = Math.min(callHexes.length, max, callsLimit);
  while (count > 1) {
    const calls = callHexes.slice(0, count);
    const tx = batchOf(api, calls);
    if (tx.encodedLength <= maxLength) {
      const kind = kindOf(api, calls);
      const batch = { count, bytes: calls.reduce((sum, hex) => sum + hex.length, 0) / 2 };
      const known = (kind !== undefined && seen.get(kind)) || [];
      if (known.some((k) => covers(k, batch))) break;
      if (refTime((await tx.paymentInfo(relayer)).weight) <= maxWeight) {
        if (kind !== undefined) seen.set(kind, [...known.filter((k) => !covers(batch, k)), batch].slice(-FITTED_KEPT));
        break;
      }
    }
    count = Math.floor(count / 2);
  }
  return count;
}

const covers = (a: Fitted, b: Fitted) => b.count <= a.count && b.bytes <= a.bytes;

/** The runtime version and the one kind of these calls (their first two bytes), or undefined when they mix kinds. */
function kindOf(api: ApiPromise, callHexes: readonly string[]): string | undefined {
  const index = callHexes[0]!.slice(0, 6);
  return callHexes.every((hex) => hex.startsWith(index)) ? `${api.runtimeVersion.specVersion.toString()}:${index}` : undefined;
}

/** Weight as a number of ref-time units, from a v1 (plain) or v2 ({ refTime, proofSize }) weight. */
function refTime(weight: { toJSON(): unknown } | unknown): number {
  const json = (weight as { toJSON?: () => unknown }).toJSON?.() ?? weight;
  if (typeof json === 'number' || typeof json === 'string') return Number(json);
  const v2 = json as { refTime?: number | string; ref_time?: number | string };
  return Number(v2.refTime ?? v2.ref_time ?? 0);
}
