import type { ApiPromise } from '@polkadot/api';
import type { SubmittableExtrinsic } from '@polkadot/api/types';
import type { KeyringPair } from '@polkadot/keyring/types';
import type { Call } from '@polkadot/types/interfaces';

/** Share of the runtime's per-extrinsic weight and block length one batch may take. */
const BATCH_SHARE = 0.75;

/**
 * The relayer's batch of these calls: `utility.forceBatch`, or, on runtimes without it, `utility.batch`
 * (whose stopped items are sent again).
 */
export function batchOf(api: ApiPromise, callHexes: readonly string[]): SubmittableExtrinsic<'promise'> {
  return batchOfCalls(
    api,
    callHexes.map((hex) => api.createType('Call', hex)),
  );
}

function batchOfCalls(api: ApiPromise, calls: readonly Call[]): SubmittableExtrinsic<'promise'> {
  return api.tx.utility.forceBatch ? api.tx.utility.forceBatch([...calls]) : api.tx.utility.batch([...calls]);
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
/**
 * Per connection, per runtime version and kind of call (or `mixed`): the most calls a batch may carry, once the node
 * refused a larger one as exhausting its limits (`refusedAsTooLarge`).
 */
const ceilings = new WeakMap<ApiPromise, Map<string, number>>();
/** How many such batches are kept per kind (the newest). */
const FITTED_KEPT = 8;
/** More than a signed extrinsic's bytes besides its calls (signature, address, era, nonce, tip, lengths). */
const ENVELOPE_BYTES = 1024;

/**
 * What one batch may take: the utility pallet's call limit, and a share of the per-extrinsic weight (its ref time and,
 * under a runtime whose weights have one, its proof size: a node refuses an extrinsic over either) and block length.
 */
interface Limits {
  readonly calls: number;
  readonly weight: number;
  readonly proof: number;
  readonly length: number;
}

/**
 * How many of these calls, taken in order, one batch can carry: bounded by the utility pallet's call
 * limit and by a share of the runtime's per-extrinsic weight and block length, and by `max`.
 *
 * The length is the extrinsic's own; the weight is the runtime's answer (`paymentInfo`), asked only when no
 * batch seen before covers this one: a batch of calls all of one kind (the same pallet and call index) weighs
 * no more than a batch of that kind, under the same runtime version, with at least as many calls and at least
 * as many bytes of calls, since each call's weight grows with its length. That holds for the calls the service
 * batches, its dialects' (fixed-shape `ats` calls, each kind its own; remarks, whose weight follows their length);
 * not for calls that wrap others or whose weight follows an argument's value, which it never batches. That answer
 * cost each round of the submitter 100–150 ms of the node's time, and 0.4 to 0.6 s under a burst, where chopsticks
 * executes it on the thread that builds its blocks (`docs/performance.md`, sections 7 and 26). So a kind's first
 * question, in a process, is about its largest batch (`askLargest`): a burst's batches grow, and each larger than any
 * before was asked about in turn. A batch mixing kinds is always asked.
 */
export async function fitBatch(api: ApiPromise, relayer: KeyringPair, callHexes: readonly string[], max: number): Promise<number> {
  const consts = api.consts as unknown as Record<string, Record<string, any> | undefined>;
  const most = weightParts(consts.system!.blockWeights!.perClass.normal.maxExtrinsic.unwrapOr(consts.system!.blockWeights!.maxBlock));
  const limits: Limits = {
    calls: Math.min(max, Number(consts.utility?.batchedCallsLimit?.toString() ?? max)),
    weight: most.refTime * BATCH_SHARE,
    proof: most.proofSize === undefined ? Infinity : most.proofSize * BATCH_SHARE,
    length: Number(consts.system!.blockLength!.max.normal.toString()) * BATCH_SHARE,
  };
  const seen = fitted.get(api) ?? fitted.set(api, new Map()).get(api)!;
  const remember = (kind: string, batch: Fitted) =>
    seen.set(kind, [...(seen.get(kind) ?? []).filter((k) => !covers(batch, k)), batch].slice(-FITTED_KEPT));
  const known = (kind: string | undefined, batch: Fitted) => kind !== undefined && (seen.get(kind) ?? []).some((k) => covers(k, batch));
  let count = Math.min(callHexes.length, limits.calls);
  while (count > 1) {
    const calls = callHexes.slice(0, count);
    const kind = kindOf(api, calls);
    // the node's refusal outranks the runtime's answer
    const ceiling = ceilingOf(api, calls);
    if (count > ceiling) {
      count = ceiling;
      continue;
    }
    const tx = batchOf(api, calls);
    if (tx.encodedLength <= limits.length) {
      const batch = { count, bytes: calls.reduce((sum, hex) => sum + hex.length, 0) / 2 };
      if (known(kind, batch)) break;
      if (kind !== undefined) {
        // unanswered, the question about this batch alone follows, as it would have
        await askLargest(api, relayer, kind, calls, limits, remember).catch(() => undefined);
        if (known(kind, batch)) break;
      }
      const weight = weightParts((await tx.paymentInfo(relayer)).weight);
      if (fits(weight, tx.encodedLength, limits)) {
        if (kind !== undefined) remember(kind, batch);
        break;
      }
      count = Math.max(1, Math.min(count - 1, asManyAsFit(count, weight, tx.encodedLength, limits))); // one call always goes
    } else count = Math.floor(count / 2);
  }
  return count;
}

/**
 * The node refused a batch of these calls as exhausting its limits (1010), though the runtime's answers had it fit
 * (a weight the runtime under-reports, a node that counts more than they tell). From now on, for the process's
 * connection to the node and the runtime's version, a batch of their kind (kinds mixed apart; a batch mixing kinds
 * takes the least of theirs) carries at most half as many calls; a refusal at that size halves it again, so the calls
 * go out in batches that fit within a few rounds, and one call always goes. Never raised again while the process and
 * the runtime last. Returns the new most.
 */
export function refusedAsTooLarge(api: ApiPromise, callHexes: readonly string[]): number {
  const byKind = ceilings.get(api) ?? ceilings.set(api, new Map()).get(api)!;
  const kind = kindOf(api, callHexes) ?? mixed(api);
  const most = Math.max(1, Math.min(ceilingOf(api, callHexes), Math.floor(callHexes.length / 2)));
  byKind.set(kind, Math.min(byKind.get(kind) ?? Infinity, most));
  return most;
}

/** The most calls a batch of these may carry after the node's refusals: the least of its kinds', and of kinds mixed. */
function ceilingOf(api: ApiPromise, callHexes: readonly string[]): number {
  const byKind = ceilings.get(api);
  if (!byKind) return Infinity;
  const kinds = new Set(callHexes.map((hex) => kindKey(api, hex.slice(0, 6))));
  if (kinds.size > 1) kinds.add(mixed(api));
  return Math.min(...[...kinds].map((kind) => byKind.get(kind) ?? Infinity));
}

/** The calls a relayer batch carries (its `utility.forceBatch` or `utility.batch`), as hex. */
export function callsOfBatch(api: ApiPromise, extrinsicHex: string): string[] {
  const extrinsic = api.createType('Extrinsic', extrinsicHex);
  return (extrinsic.method.args[0] as unknown as Call[]).map((call) => call.toHex());
}

const mixed = (api: ApiPromise) => kindKey(api, 'mixed');

/** A weight's ref time and, when it has one (weights v2), its proof size. */
export interface WeightParts {
  readonly refTime: number;
  readonly proofSize?: number;
}

/**
 * The proof an extrinsic of this weight and `length` bytes takes: its weight's proof size and, as newer nodes count
 * it, its own length; none under weights v1.
 */
const proofOf = (weight: WeightParts, length: number) => (weight.proofSize === undefined ? 0 : weight.proofSize + length);

/** Within both parts of the limits. */
export const fits = (weight: WeightParts, length: number, limits: Pick<Limits, 'weight' | 'proof'>) =>
  weight.refTime <= limits.weight && proofOf(weight, length) <= limits.proof;

/**
 * How many calls of a batch of `count` that weighs `weight` (`length` bytes) would fit, its weight shared among them, a
 * little under, by the part it is most over; at least one. A part of nothing is over no limit, a limit of nothing too.
 */
export function asManyAsFit(count: number, weight: WeightParts, length: number, limits: Pick<Limits, 'weight' | 'proof'>): number {
  const over = (used: number, limit: number) => (used === 0 ? 0 : used / limit);
  const most = Math.floor((count / Math.max(over(weight.refTime, limits.weight), over(proofOf(weight, length), limits.proof))) * 0.98);
  return Number.isFinite(most) ? Math.max(1, most) : count;
}

/**
 * Asks the runtime, once per connection and kind, about the kind's largest batch: as many copies of the longest of
 * these calls as one batch may carry and its length holds. When that is too heavy, once more about as many as its
 * answer says fit (its weight shared among its calls). What fits is remembered: it covers every batch of the kind with
 * no more calls and no more bytes. A question unanswered (the node away, a refusal) ends the asking for the kind: its
 * batches are then asked about one by one, as before, and a node that fails such questions fails those too.
 */
async function askLargest(
  api: ApiPromise,
  relayer: KeyringPair,
  kind: string,
  calls: readonly string[],
  limits: Limits,
  remember: (kind: string, batch: Fitted) => void,
): Promise<void> {
  const asked = askedLargest.get(api) ?? askedLargest.set(api, new Set()).get(api)!;
  if (asked.has(kind)) return;
  const longest = calls.reduce((a, b) => (b.length > a.length ? b : a));
  const call = api.createType('Call', longest); // decoded once, the same call repeated
  const bytes = longest.length / 2;
  // no more copies than the length holds, less more than the extrinsic's envelope: long calls are never built by the thousand
  let count = Math.min(limits.calls, Math.floor((limits.length - ENVELOPE_BYTES) / bytes));
  for (let question = 0; question < 2 && count > calls.length; question++) {
    asked.add(kind);
    const largest = batchOfCalls(api, Array<Call>(count).fill(call));
    const weight = weightParts((await largest.paymentInfo(relayer)).weight);
    if (fits(weight, largest.encodedLength, limits)) return remember(kind, { count, bytes: count * bytes });
    count = asManyAsFit(count, weight, largest.encodedLength, limits);
  }
}

const covers = (a: Fitted, b: Fitted) => b.count <= a.count && b.bytes <= a.bytes;

/** The runtime version and the one kind of these calls (their first two bytes), or undefined when they mix kinds. */
function kindOf(api: ApiPromise, callHexes: readonly string[]): string | undefined {
  const index = callHexes[0]!.slice(0, 6);
  return callHexes.every((hex) => hex.startsWith(index)) ? kindKey(api, index) : undefined;
}

/** A kind of call (its first two bytes, or `mixed`) under the runtime's version: what is learned of it lasts as long as that version. */
const kindKey = (api: ApiPromise, kind: string) => `${api.runtimeVersion.specVersion.toString()}:${kind}`;

/** A v1 (plain: ref time alone) or v2 ({ refTime, proofSize }) weight, as numbers. */
export function weightParts(weight: { toJSON(): unknown } | unknown): WeightParts {
  const json = (weight as { toJSON?: () => unknown }).toJSON?.() ?? weight;
  if (typeof json === 'number' || typeof json === 'string') return { refTime: Number(json) };
  const v2 = json as { refTime?: number | string; ref_time?: number | string; proofSize?: number | string; proof_size?: number | string };
  const proofSize = v2.proofSize ?? v2.proof_size;
  return { refTime: Number(v2.refTime ?? v2.ref_time ?? 0), ...(proofSize === undefined ? {} : { proofSize: Number(proofSize) }) };
}
