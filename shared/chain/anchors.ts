import { Keyring } from '@polkadot/keyring';
import type { ApiPromise } from '@polkadot/api';
import type { SubmittableExtrinsic } from '@polkadot/api/types';
import type { KeyringPair } from '@polkadot/keyring/types';
import type { Network } from '../config';
import type { ChainConnections } from './connections';
import { Coalescer } from '../coalesce';
import { chooseDialect, type AnchorRequest, type ItemAssignment, type ItemEvent } from './dialect';
import { onBehalfNonce } from './ats';

export type { AnchorRequest } from './dialect';

/** Blocks an extrinsic stays valid for (mortal era). */
export const ERA_PERIOD = 64;

/** Share of the runtime's per-extrinsic weight and block length one batch may take. */
const BATCH_SHARE = 0.75;

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

/** Most calls one group of quotes dry-runs together. */
const QUOTE_GROUP_MAX = 100;

export interface SignedBatch {
  readonly hex: string;
  readonly hash: string;
  readonly nonce: number;
  readonly signedAtBlock: number;
}

/** How one item of a batch went: ran and succeeded, failed alone, or never ran (a plain batch stopped early). */
export interface ItemOutcome {
  readonly status: 'ok' | 'failed' | 'not_run';
  readonly error?: string;
  readonly assignment: ItemAssignment;
}

export interface Inclusion {
  readonly blockHash: string;
  readonly blockNumber: number;
  readonly index: number;
  readonly success: boolean;
  readonly error?: string;
  /** Per item, in batch order, read from the item's own events. */
  readonly items: readonly ItemOutcome[];
}

/**
 * Chain-facing operations; every result is plain data. The relayer submits every anchor inside a
 * `utility.forceBatch` (or, on runtimes without it, `utility.batch`, whose stopped items are sent again).
 */
export class AnchorService {
  private readonly relayers = new Map<Network, KeyringPair>();
  private readonly verdicts = new Map<Network, Coalescer<string, CallVerdict>>();
  private readonly heads = new Map<string, HeightWatch>();

  constructor(private readonly chains: ChainConnections) {
    const keyring = new Keyring({ type: 'sr25519' });
    for (const net of chains.networks) this.relayers.set(net.network, keyring.addFromUri(net.relayerSeed));
  }

  relayerAddress(network: Network): string {
    return this.relayer(network).address;
  }

  async genesisHash(network: Network): Promise<Buffer> {
    const api = await this.chains.api(network);
    return Buffer.from(api.genesisHash.toU8a());
  }

  private relayer(network: Network): KeyringPair {
    const pair = this.relayers.get(network);
    if (!pair) throw new Error(`network ${network} is not configured`);
    return pair;
  }

  /** The registry dialect of the network's runtime. */
  async dialect(network: Network): Promise<'remark' | 'ats'> {
    return chooseDialect(await this.chains.api(network)).name;
  }

  /** `ats`: the owner's on-behalf nonce in the best block's state. */
  async ownerNonce(network: Network, ownerPublicKey: Buffer): Promise<bigint> {
    return onBehalfNonce(await this.chains.api(network), ownerPublicKey);
  }

  /** The encoded call of one anchor, in the dialect of the connected runtime, owner signature inside. */
  async buildCall(network: Network, request: AnchorRequest): Promise<string> {
    const api = await this.chains.api(network);
    return (await chooseDialect(api).buildCall(api, request, this.relayerAddress(network))).method.toHex();
  }

  private batch(api: ApiPromise, callHexes: readonly string[]): SubmittableExtrinsic<'promise'> {
    const calls = callHexes.map((hex) => api.createType('Call', hex));
    return api.tx.utility.forceBatch ? api.tx.utility.forceBatch(calls) : api.tx.utility.batch(calls);
  }

  /**
   * The fee of the exact extrinsic the relayer will submit for this anchor, and a dry run of its call. Quotes
   * asked while others are with the chain wait for them and then go together: one dry run and one fee query per
   * kind of call for the whole group (see `judge`), so concurrent prepares cost the chain what one does.
   */
  async quote(network: Network, request: AnchorRequest): Promise<AnchorQuote> {
    const api = await this.chains.api(network);
    const { feePlanck, dryRun } = await this.judgeCall(network, await this.buildCall(network, request));
    return {
      feePlanck,
      decimals: api.registry.chainDecimals[0] ?? 12,
      mortalitySeconds: Math.floor((ERA_PERIOD * expectedBlockTimeMs(api)) / 1000),
      dryRun,
    };
  }

  /**
   * The fee and dry run of one encoded call. Calls asked while a group is with the node wait for it and then go
   * together (`judge`), one group at a time per network.
   */
  judgeCall(network: Network, callHex: string): Promise<CallVerdict> {
    let verdicts = this.verdicts.get(network);
    if (!verdicts) {
      verdicts = new Coalescer((callHexes) => this.judge(network, callHexes), { maxBatch: QUOTE_GROUP_MAX, maxInFlight: 1 });
      this.verdicts.set(network, verdicts);
    }
    return verdicts.submit(callHex);
  }

  /**
   * Fees and dry runs of a group of calls, all read at one block. Calls of one kind and length cost the same
   * (their weight is a function of their arguments' lengths in both dialects), so the fee is asked once per
   * kind and length, of the single-call batch each will be submitted in. The dry run applies every call in one
   * `utility.batchAll` signed by the relayer, immortal, with its nonce at that block (it judges the anchors,
   * not the relayer's place in the queue): when the group fails, it is halved until the failing calls stand
   * alone, each with its own reason.
   */
  private async judge(network: Network, callHexes: readonly string[]): Promise<CallVerdict[]> {
    const api = await this.chains.api(network);
    const relayer = this.relayer(network);
    const at = (await api.rpc.chain.getBlockHash()).toHex();
    const nonce = await this.onChainNonce(network, at);
    const fees = new Map<string, Promise<bigint>>();
    const feeOf = (hex: string) => {
      const call = api.createType('Call', hex);
      const kind = `${call.section}.${call.method}:${hex.length}`;
      if (!fees.has(kind)) fees.set(kind, this.batch(api, [hex]).paymentInfo(relayer).then((info) => info.partialFee.toBigInt()));
      return fees.get(kind)!;
    };
    const dryRuns = async (hexes: readonly string[]): Promise<AnchorQuote['dryRun'][]> => {
      const calls = hexes.map((hex) => api.createType('Call', hex));
      const tx = api.tx.utility.batchAll ? api.tx.utility.batchAll(calls) : this.batch(api, hexes);
      const verdict = await this.dryRun(api, (await tx.signAsync(relayer, { nonce, era: 0 })).toHex(), at);
      if (verdict.ok || hexes.length === 1) return hexes.map(() => verdict);
      const half = Math.ceil(hexes.length / 2);
      return [...(await dryRuns(hexes.slice(0, half))), ...(await dryRuns(hexes.slice(half)))];
    };
    const [feePlanck, dryRun] = await Promise.all([Promise.all(callHexes.map(feeOf)), dryRuns(callHexes)]);
    return callHexes.map((_, i) => ({ feePlanck: feePlanck[i]!, dryRun: dryRun[i]! }));
  }

  private async dryRun(api: ApiPromise, hex: string, at: string): Promise<AnchorQuote['dryRun']> {
    const result = await api.rpc.system.dryRun(hex, at);
    if (result.isErr) return { ok: false, reason: `transaction invalid: ${result.asErr.type}${result.asErr.isInvalid ? `.${result.asErr.asInvalid.type}` : ''}` };
    const outcome = result.asOk;
    if (outcome.isErr) return { ok: false, reason: `dispatch failed: ${describeDispatchError(api, outcome.asErr)}` };
    return { ok: true };
  }

  async nextRelayerNonce(network: Network): Promise<number> {
    const api = await this.chains.api(network);
    return (await api.rpc.system.accountNextIndex(this.relayer(network).address)).toNumber();
  }

  /** The relayer's nonce in the state of block `at` (the best by default; extrinsics in the pool not counted). */
  async onChainNonce(network: Network, at?: string): Promise<number> {
    const api = await this.chains.api(network);
    const state = at ? await api.at(at) : api;
    const account = (await state.query.system.account(this.relayer(network).address)) as unknown as { nonce: { toNumber(): number } };
    return account.nonce.toNumber();
  }

  /**
   * How many of these calls, taken in order, one batch can carry: bounded by the utility pallet's call
   * limit and by a share of the runtime's per-extrinsic weight and block length, and by `max`.
   */
  async fitBatch(network: Network, callHexes: readonly string[], max: number): Promise<number> {
    const api = await this.chains.api(network);
    const consts = api.consts as unknown as Record<string, Record<string, any> | undefined>;
    const callsLimit = Number(consts.utility?.batchedCallsLimit?.toString() ?? max);
    const maxWeight = refTime(consts.system!.blockWeights!.perClass.normal.maxExtrinsic.unwrapOr(consts.system!.blockWeights!.maxBlock)) * BATCH_SHARE;
    const maxLength = Number(consts.system!.blockLength!.max.normal.toString()) * BATCH_SHARE;
    let count = Math.min(callHexes.length, max, callsLimit);
    while (count > 1) {
      const tx = this.batch(api, callHexes.slice(0, count));
      const info = await tx.paymentInfo(this.relayer(network));
      if (refTime(info.weight) <= maxWeight && tx.encodedLength <= maxLength) break;
      count = Math.floor(count / 2);
    }
    return count;
  }

  /** Signs the relayer's batch of these calls with the given nonce and a mortal era; nothing is sent. */
  async signBatch(network: Network, callHexes: readonly string[], nonce: number): Promise<SignedBatch> {
    const api = await this.chains.api(network);
    const header = await api.rpc.chain.getHeader();
    const signed = await this.batch(api, callHexes).signAsync(this.relayer(network), { nonce, era: ERA_PERIOD });
    return { hex: signed.toHex(), hash: signed.hash.toHex(), nonce, signedAtBlock: header.number.toNumber() };
  }

  /** The canonical block's hash at a height, or undefined past the best block. */
  async blockHashAt(network: Network, height: number): Promise<string | undefined> {
    const api = await this.chains.api(network);
    if (height > (await api.rpc.chain.getHeader()).number.toNumber()) return undefined;
    return (await api.rpc.chain.getBlockHash(height)).toHex();
  }

  async bestBlockNumber(network: Network): Promise<number> {
    const api = await this.chains.api(network);
    return (await api.rpc.chain.getHeader()).number.toNumber();
  }

  /**
   * Sends the signed bytes and resolves once they are in a block (or rejects with the pool's reason).
   * Sending the same bytes twice can never include them twice: the relayer nonce is part of them.
   */
  async submit(network: Network, hex: string, timeoutMs = 120_000): Promise<Inclusion> {
    const api = await this.chains.api(network);
    return new Promise<Inclusion>((resolve, reject) => {
      let unsubscribe: (() => void) | undefined;
      const timer = setTimeout(() => finish(() => reject(new Error('timed out waiting for inclusion'))), timeoutMs);
      const finish = (action: () => void) => {
        clearTimeout(timer);
        unsubscribe?.();
        action();
      };
      api.rpc.author
        .submitAndWatchExtrinsic(api.createType('Extrinsic', hex), (status) => {
          if (status.isInBlock || status.isFinalized) {
            const blockHash = (status.isInBlock ? status.asInBlock : status.asFinalized).toHex();
            const hash = api.createType('Extrinsic', hex).hash.toHex();
            this.outcome(network, blockHash, hash).then(
              (found) => finish(() => (found ? resolve(found) : reject(new Error('extrinsic not found in its block')))),
              (err) => finish(() => reject(err)),
            );
          } else if (status.isDropped || status.isInvalid || status.isUsurped) {
            // the pool took the bytes, then let them go: a revalidation (or another node) may still include them
            finish(() => reject(new SubmissionRejected(`extrinsic ${status.type.toLowerCase()}`, true)));
          }
        })
        .then((u) => (unsubscribe = u))
        .catch((err: Error) => finish(() => reject(classifySubmitError(err))));
    });
  }

  /** Where an extrinsic landed and how it and each of its batch items went, read from the block's events. */
  async outcome(network: Network, blockHash: string, extrinsicHash: string): Promise<Inclusion | undefined> {
    const api = await this.chains.api(network);
    const block = await api.rpc.chain.getBlock(blockHash);
    const index = block.block.extrinsics.findIndex((x) => x.hash.toHex() === extrinsicHash);
    if (index < 0) return undefined;
    const extrinsic = block.block.extrinsics[index]!;
    const itemCount = isBatch(extrinsic.method) ? (extrinsic.method.args[0] as unknown as unknown[]).length : 1;
    const at = await api.at(blockHash);
    const records = (await at.query.system.events()) as unknown as {
      phase: { isApplyExtrinsic: boolean; asApplyExtrinsic: { toNumber(): number } };
      event: { section: string; method: string; data: { toJSON(): unknown } & unknown[] };
    }[];
    const events = records.filter((r) => r.phase.isApplyExtrinsic && r.phase.asApplyExtrinsic.toNumber() === index).map((r) => r.event);
    const dialect = chooseDialect(api);
    let success = false;
    let error: string | undefined;
    const items: ItemOutcome[] = [];
    let pending: ItemEvent[] = [];
    for (const event of events) {
      const name = `${event.section}.${event.method}`;
      if (name === 'system.ExtrinsicSuccess') success = true;
      else if (name === 'system.ExtrinsicFailed') error = describeDispatchError(api, event.data[0] as DispatchErrorLike);
      else if (name === 'utility.ItemCompleted') {
        items.push({ status: 'ok', assignment: dialect.readAssignment(pending) });
        pending = [];
      } else if (name === 'utility.ItemFailed') {
        items.push({ status: 'failed', error: describeDispatchError(api, event.data[0] as DispatchErrorLike), assignment: {} });
        pending = [];
      } else if (name === 'utility.BatchInterrupted') {
        // a plain batch stops at its first failure: that item failed, the ones after it never ran
        items.push({ status: 'failed', error: describeDispatchError(api, event.data[1] as DispatchErrorLike), assignment: {} });
        pending = [];
      } else pending.push({ section: event.section, method: event.method, data: event.data.toJSON() });
    }
    if (!success) items.length = 0; // nothing of a failed extrinsic stands
    while (items.length < itemCount) items.push({ status: success ? 'not_run' : 'failed', error: success ? undefined : error, assignment: {} });
    return { blockHash, blockNumber: block.block.header.number.toNumber(), index, success, error, items };
  }

  /** Looks for an extrinsic in the canonical chain from a block onwards (after a crash between send and record). */
  async find(network: Network, extrinsicHash: string, fromBlock: number): Promise<Inclusion | undefined> {
    const api = await this.chains.api(network);
    const best = (await api.rpc.chain.getHeader()).number.toNumber();
    for (let n = Math.max(0, fromBlock); n <= best; n++) {
      const hash = (await api.rpc.chain.getBlockHash(n)).toHex();
      const found = await this.outcome(network, hash, extrinsicHash);
      if (found) return found;
    }
    return undefined;
  }

  /**
   * Waits until the block is finalized; true when it is still the canonical block at its height. Every waiter
   * of a network shares one subscription to finalized heads.
   */
  async waitFinalized(network: Network, blockNumber: number, blockHash: string, timeoutMs = 300_000): Promise<boolean> {
    const api = await this.chains.api(network);
    await this.watch(api, network, 'finalized').reached(blockNumber, timeoutMs);
    return (await api.rpc.chain.getBlockHash(blockNumber)).toHex() === blockHash;
  }

  /** Resolves when a block beyond the current best is imported (or after `timeoutMs`). */
  async nextBlock(network: Network, timeoutMs: number): Promise<void> {
    const api = await this.chains.api(network);
    const best = (await api.rpc.chain.getHeader()).number.toNumber();
    await this.watch(api, network, 'best').reached(best + 1, timeoutMs).catch(() => undefined);
  }

  private watch(api: ApiPromise, network: Network, head: 'best' | 'finalized'): HeightWatch {
    const key = `${network}:${head}`;
    let watch = this.heads.get(key);
    if (!watch) {
      watch =
        head === 'finalized'
          ? new HeightWatch(api, (a, onHead) => a.rpc.chain.subscribeFinalizedHeads(onHead), 'finality')
          : new HeightWatch(api, (a, onHead) => a.rpc.chain.subscribeNewHeads(onHead), 'a new block');
      this.heads.set(key, watch);
    }
    return watch;
  }
}

type HeadSubscription = (api: ApiPromise, onHead: (header: { number: { toNumber(): number } }) => void) => Promise<() => void>;

/** Waiters for heights of a head (best or finalized) over one subscription, opened while someone waits. */
class HeightWatch {
  private height = -1;
  private readonly waiters = new Set<{ height: number; resolve: () => void }>();
  private subscription: Promise<() => void> | undefined;

  constructor(
    private readonly api: ApiPromise,
    private readonly heads: HeadSubscription,
    private readonly what: string,
  ) {}

  async reached(height: number, timeoutMs: number): Promise<void> {
    if (height <= this.height) return;
    const waiter = { height, resolve: () => {} };
    const reached = new Promise<void>((resolve) => (waiter.resolve = resolve));
    this.waiters.add(waiter);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${this.what}`)), timeoutMs)));
    try {
      // a subscription that cannot be made fails its waiters (the job retries later)
      await Promise.race([reached, timedOut, this.subscribe().then(() => reached)]);
    } finally {
      clearTimeout(timer);
      this.waiters.delete(waiter);
      if (!this.waiters.size) this.unsubscribe();
    }
  }

  private subscribe(): Promise<() => void> {
    if (!this.subscription) {
      const subscription = this.heads(this.api, (header) => {
        this.height = Math.max(this.height, header.number.toNumber());
        for (const waiter of this.waiters) if (waiter.height <= this.height) waiter.resolve();
      });
      subscription.catch(() => {
        if (this.subscription === subscription) this.subscription = undefined;
      });
      this.subscription = subscription;
    }
    return this.subscription;
  }

  private unsubscribe(): void {
    const subscription = this.subscription;
    this.subscription = undefined;
    void subscription?.then((stop) => stop()).catch(() => undefined);
  }
}

/**
 * The node refused the relayer's extrinsic, or dropped it from its pool: a refusal of the relayer's
 * envelope (nonce, era, fees, signature, pool space), never of a call inside it, whose own dispatch errors
 * are read from its block. `mayStillLand`: the node held these very bytes (1012 temporarily banned, 1013
 * already imported, or a watch that reported them invalid, dropped or usurped after the pool took them), so
 * they may still be included; otherwise (refused as they were sent) they can only be included if sent again.
 */
export class SubmissionRejected extends Error {
  override readonly name = 'SubmissionRejected';
  constructor(
    message: string,
    readonly mayStillLand = false,
  ) {
    super(message);
  }
}

function classifySubmitError(err: Error): Error {
  // 1010 invalid (stale or future nonce, payment, bad proof, ancient birth block, exhausts resources),
  // 1011 unknown validity, 1014 priority too low (another extrinsic holds the nonce): not in the pool.
  if (/^101[0124]|Invalid Transaction|Inability to pay|Priority is too low|Transaction is outdated|stale/i.test(err.message)) {
    return new SubmissionRejected(err.message);
  }
  if (/^101[23]|Temporarily Banned|Already Imported/i.test(err.message)) return new SubmissionRejected(err.message, true);
  return err;
}

type DispatchErrorLike = { isModule?: boolean; asModule?: unknown; type?: string; toString(): string };

function describeDispatchError(api: ApiPromise, error: DispatchErrorLike): string {
  if (error.isModule) {
    const meta = api.registry.findMetaError(error.asModule as Parameters<ApiPromise['registry']['findMetaError']>[0]);
    return `${meta.section}.${meta.name}`;
  }
  return error.type ?? error.toString();
}

function isBatch(method: { section: string; method: string }): boolean {
  return method.section === 'utility' && (method.method === 'batch' || method.method === 'forceBatch' || method.method === 'batchAll');
}

/** Weight as a number of ref-time units, from a v1 (plain) or v2 ({ refTime, proofSize }) weight. */
function refTime(weight: { toJSON(): unknown } | unknown): number {
  const json = (weight as { toJSON?: () => unknown }).toJSON?.() ?? weight;
  if (typeof json === 'number' || typeof json === 'string') return Number(json);
  const v2 = json as { refTime?: number | string; ref_time?: number | string };
  return Number(v2.refTime ?? v2.ref_time ?? 0);
}

function expectedBlockTimeMs(api: ApiPromise): number {
  const consts = api.consts as unknown as Record<string, Record<string, { toNumber(): number } | undefined> | undefined>;
  const babe = consts.babe?.expectedBlockTime?.toNumber();
  if (babe) return babe;
  const period = consts.timestamp?.minimumPeriod?.toNumber();
  return period ? period * 2 : 12_000;
}

