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
/** Per connection: the kinds of call whose largest batch the runtime was asked about (`askLargest`), once each. */
const askedLargest = new WeakMap<ApiPromise, Set<string>>();
/** How many such batches are kept per kind (the newest). */
const FITTED_KEPT = 8;
/** More than a signed extrinsic's bytes besides its calls (signature, address, era, nonce, tip, lengths). */
const ENVELOPE_BYTES = 1024;

/** What one batch may take: the utility pallet's call limit, and a share of the per-extrinsic weight and block length. */
interface Limits {
  readonly calls: number;
  readonly weight: number;
  readonly length: number;
}

/**
 * How many of these calls, taken in order, one batch can carry: bounded by the utility pallet's call
 * limit and by a share of the runtime's per-extrinsic weight and block length, and by `max`.
 *
 * The length is the extrinsic's own; the weight is the runtime's answer (`paymentInfo`), asked only when no
 * batch seen before covers this one: a batch of calls all of one kind (the same pallet and call index) weighs
 * no more than a batch of that kind, under the same runtime version, with at least as many calls and at least
 * as many bytes of calls, since each call's weight grows with its length. That answer cost each round of the
 * submitter 100–150 ms of the node's time, and 0.4 to 0.6 s under a burst, where the node executes it beside its
 * block building (`docs/performance.md`, sections 7 and 26). So the first question about a kind is about its largest
 * batch (`askLargest`): a burst's batches grow, and each larger than any before was asked about in turn. A batch
 * mixing kinds is always asked.
 */
export async function fitBatch(api: ApiPromise, relayer: KeyringPair, callHexes: readonly string[], max: number): Promise<number> {
  const consts = api.consts as unknown as Record<string, Record<string, any> | undefined>;
  const limits: Limits = {
    calls: Math.min(max, Number(consts.utility?.batchedCallsLimit?.toString() ?? max)),
    weight:
      refTime(consts.system!.blockWeights!.perClass.normal.maxExtrinsic.unwrapOr(consts.system!.blockWeights!.maxBlock)) * BATCH_SHARE,
    length: Number(consts.system!.blockLength!.max.normal.toString()) * BATCH_SHARE,
  };
  const seen = fitted.get(api) ?? fitted.set(api, new Map()).get(api)!;
  const remember = (kind: string, batch: Fitted) =>
    seen.set(kind, [...(seen.get(kind) ?? []).filter((k) => !covers(batch, k)), batch].slice(-FITTED_KEPT));
  const known = (kind: string | undefined, batch: Fitted) => kind !== undefined && (seen.get(kind) ?? []).some((k) => covers(k, batch));
  let count = Math.min(callHexes.length, limits.calls);
  while (count > 1) {
    const calls = callHexes.slice(0, count);
    const tx = batchOf(api, calls);
    if (tx.encodedLength <= limits.length) {
      const kind = kindOf(api, calls);
      const batch = { count, bytes: calls.reduce((sum, hex) => sum + hex.length, 0) / 2 };
      if (known(kind, batch)) break;
      if (kind !== undefined && (await askLargest(api, relayer, kind, calls, limits, remember)) && known(kind, batch)) break;
      if (refTime((await tx.paymentInfo(relayer)).weight) <= limits.weight) {
        if (kind !== undefined) remember(kind, batch);
        break;
      }
    }
    count = Math.floor(count / 2);
  }
  return count;
}

/**
 * Asks the runtime, once per connection and kind, about the kind's largest batch: as many copies of the longest of
 * these calls as one batch may carry, halved until its length fits (no question for that). Remembered when it fits:
 * it covers every batch of the kind with no more calls and no more bytes. True when it was answered now.
 */
async function askLargest(
  api: ApiPromise,
  relayer: KeyringPair,
  kind: string,
  calls: readonly string[],
  limits: Limits,
  remember: (kind: string, batch: Fitted) => void,
): Promise<boolean> {
  const asked = askedLargest.get(api) ?? askedLargest.set(api, new Set()).get(api)!;
  if (asked.has(kind)) return false;
  asked.add(kind);
  const longest = calls.reduce((a, b) => (b.length > a.length ? b : a));
  // no more copies than the length could hold (less the extrinsic's envelope), so that long calls are not built in thousands
  const fitsLength = Math.floor((limits.length - ENVELOPE_BYTES) / (longest.length / 2));
  for (let count = Math.min(limits.calls, fitsLength); count > calls.length; count = Math.floor(count / 2)) {
    const tx = batchOf(api, Array<string>(count).fill(longest));
    if (tx.encodedLength > limits.length) continue;
    try {
      if (refTime((await tx.paymentInfo(relayer)).weight) <= limits.weight) remember(kind, { count, bytes: (count * longest.length) / 2 });
      return true;
    } catch {
      // unanswered (a dropped connection): asked again at the kind's next question; this batch is asked about alone
      asked.delete(kind);
      return false;
    }
  }
  return false;
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
