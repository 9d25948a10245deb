import { Keyring } from '@polkadot/keyring';
import type { ApiPromise } from '@polkadot/api';
import type { KeyringPair } from '@polkadot/keyring/types';
import type { Network } from '../config';
import type { ChainConnections } from './connections';
import { Coalescer } from '../coalesce';
import type { AnchorRequest } from './dialect';
import { chooseDialect } from './choose-dialect';
import { onBehalfNonce } from './dialects/ats';
import { callsOfBatch, fitBatch, refusedAsTooLarge } from './batch';
import { BlockFees, dryRunAt, judgeCalls, QUOTE_GROUP_MAX, quoteOf, type AnchorQuote, type CallVerdict, type DryRunVerdict } from './quote';
import { accountNonceAt, AlreadyImported, followHeld, signBatch, submitAndWatch, type SignedBatch, type WatchVia } from './submit';
import { findInclusion, outcomeIn, type Inclusion } from './inclusion';
import { bestBlockNumber, blockHashAt, finalizedBlockNumber, finalizedHead, HeadWatches, waitFinalized } from './heads';

export type { AnchorRequest } from './dialect';
export type { AnchorQuote, CallVerdict } from './quote';
export type { ItemOutcome, Inclusion } from './inclusion';
export { AlreadyImported, ERA_PERIOD, ExhaustsResources, SubmissionRejected, WatchLost, type SignedBatch } from './submit';

/** Extrinsics whose finalized blocks looked through are remembered (`find`); a batch's each, while it is on its way. */
const LOOKED_THROUGH_KEPT = 1000;

/**
 * New blocks a batch's watch may see pass without its bytes in one (or let go) before the node's pool is asked for
 * them, and, not there either, they are looked for on chain and sent again: a node that lost them without a word
 * (chopsticks when a block's building fails) would otherwise keep their calls out of every block until the watch's
 * timeout. A pool that holds them (a congested chain's) starts the count again.
 */
export const SILENT_BLOCKS = 8;

/** The commitment `quoteAhead` builds its call over: any 32 bytes do. */
const PLACEHOLDER_COMMITMENT = Buffer.alloc(32);

/** Lends the owner's wallet seed to `use`, and wipes it after (the caller finds and opens it). */
export type WithOwnerSeed = <T>(use: (seed: Buffer) => Promise<T>) => Promise<T>;

/**
 * Chain-facing operations, per network, over the relayer's key; every result is plain data. The work is
 * done in quote.ts (fees, dry runs), batch.ts (batch sizing), submit.ts (signing, sending), inclusion.ts
 * (where an extrinsic landed and how its items went) and heads.ts (new and finalized heads).
 */
export class AnchorService {
  private readonly relayers = new Map<Network, KeyringPair>();
  /** The relayers' ss58 addresses: a pair encodes its address (with a checksum) every time it is asked. */
  private readonly addresses = new Map<Network, string>();
  private readonly verdicts = new Map<Network, Coalescer<string, CallVerdict>>();
  private readonly fees = new Map<Network, BlockFees>();
  private readonly heads = new HeadWatches();
  /**
   * Per network and extrinsic looked for and not found: the highest finalized block looked through, which no fork
   * can change. A batch the node let go is looked for every round until its era ends (64 blocks); each look reads
   * only the blocks after these.
   */
  private readonly lookedThrough = new Map<string, number>();

  constructor(private readonly chains: ChainConnections) {
    const keyring = new Keyring({ type: 'sr25519' });
    for (const net of chains.networks) {
      const pair = keyring.addFromUri(net.relayerSeed);
      this.relayers.set(net.network, pair);
      this.addresses.set(net.network, pair.address);
    }
  }

  relayerAddress(network: Network): string {
    const address = this.addresses.get(network);
    if (!address) throw new Error(`network ${network} is not configured`);
    return address;
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
    return chooseDialect(api).buildCall(api, request, this.relayerAddress(network));
  }

  /**
   * The fee of the exact extrinsic the relayer will submit for this anchor, and a dry run of its call. Quotes
   * asked while others are with the chain wait for them and then go together: one dry run for the whole group
   * and one fee query per kind of call and block (see `judgeCalls`), so concurrent prepares cost the chain what
   * one does.
   */
  async quote(network: Network, request: AnchorRequest): Promise<AnchorQuote> {
    const api = await this.chains.api(network);
    return quoteOf(api, await this.judgeCall(network, await this.buildCall(network, request)));
  }

  /**
   * The quote of an anchor whose commitment is not known yet (prepare asks it while the upload is still being
   * hashed): the fee and dry run of the same call over a placeholder commitment. Neither depends on the
   * commitment's bytes in either dialect. The call's length is fixed by its kind (a commitment is always 32
   * bytes), and so is its weight; the remark dialect's chain reads nothing of the payload, and the ATS pallet
   * checks the commitment only inside the owner's signature, made here over the placeholder with the same seed
   * and nonce (it has no check on commitment values, such as a duplicate: pallet-ats `create_on_behalf` and
   * `update_on_behalf`, read at 2a5240a and 3e62b7b). The remark dialect's call needs no signature at all
   * (`quoteCall`): the seed is asked of `ownerSeed` only by a dialect that signs. `test/integration/batching.test.ts`
   * holds the verdicts of both calls equal.
   */
  async quoteAhead(
    network: Network,
    request: Omit<AnchorRequest, 'commitment' | 'ownerSeed'>,
    ownerSeed: WithOwnerSeed,
  ): Promise<AnchorQuote> {
    const api = await this.chains.api(network);
    const dialect = chooseDialect(api);
    const placeholder = { ...request, commitment: PLACEHOLDER_COMMITMENT };
    const callHex =
      dialect.quoteCall?.(api, placeholder) ??
      (await ownerSeed((seed) => dialect.buildCall(api, { ...placeholder, ownerSeed: seed }, this.relayerAddress(network))));
    return quoteOf(api, await this.judgeCall(network, callHex));
  }

  /**
   * The fee and dry run of one encoded call. Calls asked while a group is with the node wait for it and then go
   * together (`judgeCalls`), one group at a time per network.
   */
  judgeCall(network: Network, callHex: string): Promise<CallVerdict> {
    let verdicts = this.verdicts.get(network);
    if (!verdicts) {
      verdicts = new Coalescer((callHexes) => this.judge(network, callHexes), { maxBatch: QUOTE_GROUP_MAX, maxInFlight: 1 });
      this.verdicts.set(network, verdicts);
    }
    return verdicts.submit(callHex);
  }

  private async judge(network: Network, callHexes: readonly string[]): Promise<CallVerdict[]> {
    const api = await this.chains.api(network);
    let fees = this.fees.get(network);
    if (!fees) this.fees.set(network, (fees = new BlockFees()));
    return judgeCalls(api, this.relayer(network), callHexes, (a, hex, at) => this.dryRun(a, hex, at), fees);
  }

  /** Every dry run the service asks of a node goes through here. */
  private dryRun(api: ApiPromise, hex: string, at: string): Promise<DryRunVerdict> {
    return dryRunAt(api, hex, at);
  }

  /** The relayer's nonce in the state of block `at` (the best by default; extrinsics in the pool not counted). */
  async onChainNonce(network: Network, at?: string): Promise<number> {
    return accountNonceAt(await this.chains.api(network), this.relayerAddress(network), at);
  }

  /** How many of these calls, taken in order, one batch can carry (batch.ts). */
  async fitBatch(network: Network, callHexes: readonly string[], max: number): Promise<number> {
    return fitBatch(await this.chains.api(network), this.relayer(network), callHexes, max);
  }

  /**
   * The node refused this signed batch as exhausting its limits: its kind's batches carry fewer calls (batch.ts).
   * The new most, or 0 when nothing was learned (the node away, bytes that no longer decode after a runtime upgrade).
   */
  async refusedAsTooLarge(network: Network, extrinsicHex: string): Promise<number> {
    try {
      const api = await this.chains.api(network);
      return refusedAsTooLarge(api, callsOfBatch(api, extrinsicHex));
    } catch {
      return 0;
    }
  }

  /** Signs the relayer's batch of these calls with the given nonce and a mortal era; nothing is sent. */
  async signBatch(network: Network, callHexes: readonly string[], nonce: number): Promise<SignedBatch> {
    return signBatch(await this.chains.api(network), this.relayer(network), callHexes, nonce);
  }

  /** The canonical block's hash at a height, or undefined past the best block. */
  async blockHashAt(network: Network, height: number): Promise<string | undefined> {
    return blockHashAt(await this.chains.api(network), height);
  }

  /** The finalized head's height and hash. */
  async finalizedHead(network: Network): Promise<{ number: number; hash: string }> {
    return finalizedHead(await this.chains.api(network));
  }

  /**
   * Sends the signed bytes and resolves once they are in a block (or rejects with the pool's reason).
   * Sending the same bytes twice can never include them twice: the relayer nonce is part of them. Bytes the node
   * answers it holds already (1013: sent before, their watch gone with its connection) are followed into their block.
   */
  async submit(network: Network, batch: Pick<SignedBatch, 'hex' | 'hash' | 'signedAtBlock'>, timeoutMs = 120_000): Promise<Inclusion> {
    const via = await this.chains.watchVia(network);
    const watched = new AbortController();
    try {
      const locate = (blockHash: string, hash: string) => this.outcome(network, blockHash, hash);
      const lost = this.lost(via, network, batch.hex, timeoutMs, watched.signal);
      return await submitAndWatch(via, batch.hex, timeoutMs, locate, lost).catch((err: Error) => {
        if (!(err instanceof AlreadyImported)) throw err;
        const heads = this.heads.of(via.api, network, 'best');
        const find = () => this.find(network, batch.hash, batch.signedAtBlock);
        return followHeld({ api: via.api, heads, find }, Date.now() + timeoutMs, lost, watched.signal);
      });
    } finally {
      watched.abort();
    }
  }

  /**
   * Resolves (with why) once the node has lost these bytes: `SILENT_BLOCKS` new blocks without them, and then not in
   * its pool either (a pool that holds them, a congested chain's, starts the count again). A node that does not say
   * what its pool holds is taken as having lost them: they are looked for on chain, and a resend is answered
   * "already imported" if it holds them after all.
   */
  private async lost({ api, provider }: WatchVia, network: Network, hex: string, timeoutMs: number, signal: AbortSignal): Promise<string> {
    const heads = this.heads.of(api, network, 'best');
    for (let from = await bestBlockNumber(api); ; from += SILENT_BLOCKS) {
      await heads.reached(from + SILENT_BLOCKS, timeoutMs, signal);
      // the pool's bytes as the node sends them, compared as they are (not decoded: a congested pool is large)
      const pool = (await provider.send('author_pendingExtrinsics', [], false).catch(() => undefined)) as string[] | undefined;
      signal.throwIfAborted();
      if (!pool?.includes(hex)) return `not in a block ${SILENT_BLOCKS} blocks after it was sent, nor in the pool`;
    }
  }

  /** Where an extrinsic landed and how it and each of its batch items went, read from the block's events. */
  async outcome(network: Network, blockHash: string, extrinsicHash: string): Promise<Inclusion | undefined> {
    return outcomeIn(await this.chains.api(network), blockHash, extrinsicHash);
  }

  /**
   * Looks for an extrinsic in the canonical chain from a block onwards (after a crash between send and record).
   * `finalized`: the finalized height, when the caller has just read it (before this look).
   */
  async find(network: Network, extrinsicHash: string, fromBlock: number, finalized?: number): Promise<Inclusion | undefined> {
    const api = await this.chains.api(network);
    const key = `${network}:${extrinsicHash}`;
    const before = this.lookedThrough.get(key);
    // read before the look: every block from `from` up to it is read by the look, and was final when read
    finalized ??= await finalizedBlockNumber(api);
    const found = await findInclusion(api, extrinsicHash, Math.max(fromBlock, before === undefined ? fromBlock : before + 1));
    this.lookedThrough.delete(key); // re-inserted last: the oldest entries go first past the bound
    if (!found) this.lookedThrough.set(key, Math.max(before ?? -1, finalized));
    if (this.lookedThrough.size > LOOKED_THROUGH_KEPT) this.lookedThrough.delete(this.lookedThrough.keys().next().value!);
    return found;
  }

  /**
   * Waits until the block is finalized; true when it is still the canonical block at its height. Every waiter
   * of a network shares one subscription to finalized heads.
   */
  async waitFinalized(network: Network, blockNumber: number, blockHash: string, timeoutMs = 300_000): Promise<boolean> {
    const api = await this.chains.api(network);
    return waitFinalized(api, this.heads.of(api, network, 'finalized'), blockNumber, blockHash, timeoutMs);
  }

  /** Resolves when a block beyond the current best is imported (or after `timeoutMs`). */
  async nextBlock(network: Network, timeoutMs: number): Promise<void> {
    const api = await this.chains.api(network);
    const best = await bestBlockNumber(api);
    await this.heads
      .of(api, network, 'best')
      .reached(best + 1, timeoutMs)
      .catch(() => undefined);
  }
}
