import type { ApiPromise } from '@polkadot/api';
import type { KeyringPair } from '@polkadot/keyring/types';
import { batchOf } from './batch';
import { describeDispatchError } from './inclusion';
import { accountNonceAt, ERA_PERIOD } from './submit';
import { nativeDecimals } from './tokens';

export interface AnchorQuote {
  /** Fee the relayer pays for the exact call (a batch of this one item), in planck. */
  readonly feePlanck: bigint;
  readonly decimals: number;
  /** Seconds an extrinsic signed now stays valid. */
  readonly mortalitySeconds: number;
  readonly dryRun: { ok: true } | { ok: false; reason: string };
}

/** What the chain says of one call: its fee and whether it would go through. */
export type CallVerdict = Pick<AnchorQuote, 'feePlanck' | 'dryRun'>;

export type DryRunVerdict = AnchorQuote['dryRun'];

/** One dry run of signed bytes at a block (a parameter of `judgeCalls` so its callers can count them). */
export type DryRun = (api: ApiPromise, hex: string, at: string) => Promise<DryRunVerdict>;

/** Most calls one group of quotes dry-runs together. */
export const QUOTE_GROUP_MAX = 100;

/** A quote of a call whose verdict is known, in the runtime's terms (decimals, mortality). */
export function quoteOf(api: ApiPromise, { feePlanck, dryRun }: CallVerdict): AnchorQuote {
  return {
    feePlanck,
    decimals: nativeDecimals(api),
    mortalitySeconds: Math.floor((ERA_PERIOD * expectedBlockTimeMs(api)) / 1000),
    dryRun,
  };
}

/**
 * Fees by kind and length of call at the latest block a group was judged at: the same question of the same
 * state has the same answer, so a fee is asked again only once the chain has moved on. A failed question is
 * forgotten.
 */
export class BlockFees {
  private at = '';
  private readonly fees = new Map<string, Promise<bigint>>();

  of(at: string, kind: string, ask: () => Promise<bigint>): Promise<bigint> {
    if (at !== this.at) {
      this.at = at;
      this.fees.clear();
    }
    let fee = this.fees.get(kind);
    if (!fee) {
      const asked = ask();
      asked.catch(() => {
        if (this.fees.get(kind) === asked) this.fees.delete(kind);
      });
      this.fees.set(kind, asked);
      fee = asked;
    }
    return fee;
  }
}

/**
 * Fees and dry runs of a group of calls, all read at one block. Calls of one kind and length cost the same
 * (their weight is a function of their arguments' lengths in both dialects), so the fee is asked once per
 * kind and length and block (`fees`), of the single-call batch each will be submitted in. The dry run applies
 * every call in one `utility.batchAll` signed by the relayer, immortal, with its nonce at that block (it judges
 * the anchors, not the relayer's place in the queue): when the group fails, it is halved until the failing
 * calls stand alone, each with its own reason.
 */
export async function judgeCalls(
  api: ApiPromise,
  relayer: KeyringPair,
  callHexes: readonly string[],
  dryRun: DryRun,
  fees: BlockFees = new BlockFees(),
): Promise<CallVerdict[]> {
  const at = (await api.rpc.chain.getBlockHash()).toHex();
  const nonce = await accountNonceAt(api, relayer.address, at);
  const feeOf = (hex: string) => {
    const call = api.createType('Call', hex);
    return fees.of(at, `${call.section}.${call.method}:${hex.length}`, () =>
      batchOf(api, [hex])
        .paymentInfo(relayer)
        .then((info) => info.partialFee.toBigInt()),
    );
  };
  const dryRuns = async (hexes: readonly string[]): Promise<DryRunVerdict[]> => {
    const calls = hexes.map((hex) => api.createType('Call', hex));
    const tx = api.tx.utility.batchAll ? api.tx.utility.batchAll(calls) : batchOf(api, hexes);
    const verdict = await dryRun(api, (await tx.signAsync(relayer, { nonce, era: 0 })).toHex(), at);
    if (verdict.ok || hexes.length === 1) return hexes.map(() => verdict);
    const half = Math.ceil(hexes.length / 2);
    return [...(await dryRuns(hexes.slice(0, half))), ...(await dryRuns(hexes.slice(half)))];
  };
  const [feePlanck, verdicts] = await Promise.all([Promise.all(callHexes.map(feeOf)), dryRuns(callHexes)]);
  return callHexes.map((_, i) => ({ feePlanck: feePlanck[i]!, dryRun: verdicts[i]! }));
}

/** The node's dry run of signed bytes in the state of block `at`. */
export async function dryRunAt(api: ApiPromise, hex: string, at: string): Promise<DryRunVerdict> {
  const result = await api.rpc.system.dryRun(hex, at);
  if (result.isErr)
    return {
      ok: false,
      reason: `transaction invalid: ${result.asErr.type}${result.asErr.isInvalid ? `.${result.asErr.asInvalid.type}` : ''}`,
    };
  const outcome = result.asOk;
  if (outcome.isErr) return { ok: false, reason: `dispatch failed: ${describeDispatchError(api, outcome.asErr)}` };
  return { ok: true };
}

function expectedBlockTimeMs(api: ApiPromise): number {
  const consts = api.consts as unknown as Record<string, Record<string, { toNumber(): number } | undefined> | undefined>;
  const babe = consts.babe?.expectedBlockTime?.toNumber();
  if (babe) return babe;
  const period = consts.timestamp?.minimumPeriod?.toNumber();
  return period ? period * 2 : 12_000;
}
