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

/** Per connection, per runtime version and kind of call: what the runtime said of batches of that kind. */
const fitted = new WeakMap<ApiPromise, Map<string, KindMemory>>();
/** How many batches of each verdict are kept per kind (the newest). */
const FITTED_KEPT = 8;

/**
 * How many of these calls, taken in order, one batch can carry: bounded by the utility pallet's call
 * limit and by a share of the runtime's per-extrinsic weight and block length, and by `max`.
 *
 * The length is the extrinsic's own; the weight is the runtime's answer (`paymentInfo`), asked only when no
 * batch seen before covers this one: a batch of calls all of one kind (the same pallet and call index) weighs
 * no more than a batch of that kind, under the same runtime version, with at least as many calls and at least
 * as many bytes of calls, since each call's weight grows with its length. That answer cost each round of the
 * submitter 100–150 ms of the node's time, and under a burst, whose batches grow round after round, a wait of
 * 0.4 to 1.2 s for the block chopsticks was building (`docs/performance.md`): so when it must be asked, it is
 * asked of these calls repeated to `PROBE_GROWTH` times as many (within the limits), whose yes covers the larger
 * batches that follow; a no is remembered, and this batch itself is asked. A batch mixing kinds is always asked.
 */
export async function fitBatch(api: ApiPromise, relayer: KeyringPair, callHexes: readonly string[], max: number): Promise<number> {
  const consts = api.consts as unknown as Record<string, Record<string, any> | undefined>;
  const callsLimit = Number(consts.utility?.batchedCallsLimit?.toString() ?? max);
  const maxWeight =
    refTime(consts.system!.blockWeights!.perClass.normal.maxExtrinsic.unwrapOr(consts.system!.blockWeights!.maxBlock)) * BATCH_SHARE;
  const maxLength = Number(consts.system!.blockLength!.max.normal.toString()) * BATCH_SHARE;
  const seen = memoryOf(api);
  /** Whether the runtime takes a batch of these calls (`tx` when built already), remembered per kind. */
  const fits = async (calls: readonly string[], kind: string | undefined, tx = batchOf(api, calls)): Promise<boolean> => {
    const fit = tx.encodedLength <= maxLength && refTime((await tx.paymentInfo(relayer)).weight) <= maxWeight;
    if (kind !== undefined) seen.set(kind, remember(seen.get(kind), { count: calls.length, bytes: bytesOf(calls) }, fit));
    return fit;
  };
  let count = Math.min(callHexes.length, max, callsLimit);
  while (count > 1) {
    const calls = callHexes.slice(0, count);
    const tx = batchOf(api, calls);
    if (tx.encodedLength <= maxLength) {
      const kind = kindOf(api, calls);
      const known = kind === undefined ? undefined : seen.get(kind);
      const batch = { count, bytes: bytesOf(calls) };
      if (known?.fit.some((k) => covers(k, batch))) break;
      const ahead = cycled(calls, Math.min(max, callsLimit, count * PROBE_GROWTH));
      const probe = { count: ahead.length, bytes: bytesOf(ahead) };
      const worthAsking = kind !== undefined && ahead.length > count && !known?.unfit.some((k) => covers(probe, k));
      if (worthAsking && (await fits(ahead, kind))) break;
      if (await fits(calls, kind, tx)) break;
    }
    count = Math.floor(count / 2);
  }
  return count;
}

/** How many times as many calls as a batch not covered the runtime is asked about in its stead. */
const PROBE_GROWTH = 4;

/** Per kind of call: the batches seen to fit that no other one covers, and those seen not to. */
interface KindMemory {
  readonly fit: readonly Fitted[];
  readonly unfit: readonly Fitted[];
}

function memoryOf(api: ApiPromise): Map<string, KindMemory> {
  return fitted.get(api) ?? fitted.set(api, new Map()).get(api)!;
}

function remember(known: KindMemory = { fit: [], unfit: [] }, batch: Fitted, fit: boolean): KindMemory {
  return fit
    ? { ...known, fit: [...known.fit.filter((k) => !covers(batch, k)), batch].slice(-FITTED_KEPT) }
    : { ...known, unfit: [...known.unfit.filter((k) => !covers(k, batch)), batch].slice(-FITTED_KEPT) };
}

/** `count` calls: these, over and over, in order. */
const cycled = (calls: readonly string[], count: number) => Array.from({ length: count }, (_, i) => calls[i % calls.length]!);

const bytesOf = (callHexes: readonly string[]) => callHexes.reduce((sum, hex) => sum + hex.length, 0) / 2;

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
