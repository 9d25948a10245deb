import { Keyring } from '@polkadot/keyring';
import type { ApiPromise } from '@polkadot/api';
import type { KeyringPair } from '@polkadot/keyring/types';
import type { Network } from '../config';
import type { ChainConnections } from './connections';
import { encodeSignedAnchor, type AnchorFields } from './remark-payload';

/** Blocks an extrinsic stays valid for (mortal era). */
export const ERA_PERIOD = 64;

export interface AnchorRequest extends Omit<AnchorFields, 'ownerPublicKey'> {
  readonly ownerSeed: Buffer;
}

export interface AnchorQuote {
  /** Fee the relayer pays for the exact call, in planck. */
  readonly feePlanck: bigint;
  readonly decimals: number;
  /** Seconds an extrinsic signed now stays valid. */
  readonly mortalitySeconds: number;
  readonly dryRun: { ok: true } | { ok: false; reason: string };
}

export interface SignedAnchor {
  readonly hex: string;
  readonly hash: string;
  readonly nonce: number;
  readonly signedAtBlock: number;
}

export interface Inclusion {
  readonly blockHash: string;
  readonly blockNumber: number;
  readonly index: number;
  readonly success: boolean;
  readonly error?: string;
}

/** Chain-facing operations of the `remark` dialect; every result is plain data. */
export class AnchorService {
  private readonly relayers = new Map<Network, KeyringPair>();

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

  private async call(api: ApiPromise, request: AnchorRequest) {
    const payload = encodeSignedAnchor(request, request.ownerSeed, Buffer.from(api.genesisHash.toU8a()));
    // hex, so the bytes are taken as the remark itself rather than as SCALE-encoded Bytes
    return api.tx.system.remarkWithEvent(`0x${payload.toString('hex')}`);
  }

  /** The fee of the exact call the relayer will submit, and a dry run of it signed as it would be. */
  async quote(network: Network, request: AnchorRequest): Promise<AnchorQuote> {
    const api = await this.chains.api(network);
    const relayer = this.relayer(network);
    const tx = await this.call(api, request);
    const info = await tx.paymentInfo(relayer);
    const nonce = (await api.rpc.system.accountNextIndex(relayer.address)).toNumber();
    const signed = await tx.signAsync(relayer, { nonce, era: ERA_PERIOD });
    const dryRun = await this.dryRun(api, signed.toHex());
    return {
      feePlanck: info.partialFee.toBigInt(),
      decimals: api.registry.chainDecimals[0] ?? 12,
      mortalitySeconds: Math.floor((ERA_PERIOD * expectedBlockTimeMs(api)) / 1000),
      dryRun,
    };
  }

  private async dryRun(api: ApiPromise, hex: string): Promise<AnchorQuote['dryRun']> {
    const result = await api.rpc.system.dryRun(hex);
    if (result.isErr) return { ok: false, reason: `transaction invalid: ${result.asErr.type}${result.asErr.isInvalid ? `.${result.asErr.asInvalid.type}` : ''}` };
    const outcome = result.asOk;
    if (outcome.isErr) return { ok: false, reason: `dispatch failed: ${describeDispatchError(api, outcome.asErr)}` };
    return { ok: true };
  }

  async nextRelayerNonce(network: Network): Promise<number> {
    const api = await this.chains.api(network);
    return (await api.rpc.system.accountNextIndex(this.relayer(network).address)).toNumber();
  }

  /** Signs the relayer's extrinsic with the given nonce and a mortal era; nothing is sent. */
  async sign(network: Network, request: AnchorRequest, nonce: number): Promise<SignedAnchor> {
    const api = await this.chains.api(network);
    const tx = await this.call(api, request);
    const header = await api.rpc.chain.getHeader();
    const signed = await tx.signAsync(this.relayer(network), { nonce, era: ERA_PERIOD });
    return { hex: signed.toHex(), hash: signed.hash.toHex(), nonce, signedAtBlock: header.number.toNumber() };
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
            finish(() => reject(new SubmissionRejected(`extrinsic ${status.type.toLowerCase()}`)));
          }
        })
        .then((u) => (unsubscribe = u))
        .catch((err: Error) => finish(() => reject(classifySubmitError(err))));
    });
  }

  /** Where an extrinsic landed and how it went, read from the block's events. */
  async outcome(network: Network, blockHash: string, extrinsicHash: string): Promise<Inclusion | undefined> {
    const api = await this.chains.api(network);
    const block = await api.rpc.chain.getBlock(blockHash);
    const index = block.block.extrinsics.findIndex((x) => x.hash.toHex() === extrinsicHash);
    if (index < 0) return undefined;
    const at = await api.at(blockHash);
    const events = (await at.query.system.events()) as unknown as {
      phase: { isApplyExtrinsic: boolean; asApplyExtrinsic: { toNumber(): number } };
      event: { section: string; method: string; data: unknown[] };
    }[];
    let success = false;
    let error: string | undefined;
    for (const { phase, event } of events) {
      if (!phase.isApplyExtrinsic || phase.asApplyExtrinsic.toNumber() !== index || event.section !== 'system') continue;
      if (event.method === 'ExtrinsicSuccess') success = true;
      if (event.method === 'ExtrinsicFailed') error = describeDispatchError(api, event.data[0] as DispatchErrorLike);
    }
    return { blockHash, blockNumber: block.block.header.number.toNumber(), index, success, error };
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

  /** Waits until the block is finalized; true when it is still the canonical block at its height. */
  async waitFinalized(network: Network, blockNumber: number, blockHash: string, timeoutMs = 300_000): Promise<boolean> {
    const api = await this.chains.api(network);
    const deadline = Date.now() + timeoutMs;
    return new Promise<boolean>((resolve, reject) => {
      let done = false;
      let unsubscribe: (() => void) | undefined;
      const check = async (finalizedNumber: number) => {
        if (done || finalizedNumber < blockNumber) {
          if (!done && Date.now() > deadline) finish(() => reject(new Error('timed out waiting for finality')));
          return;
        }
        const canonical = (await api.rpc.chain.getBlockHash(blockNumber)).toHex();
        finish(() => resolve(canonical === blockHash));
      };
      const finish = (action: () => void) => {
        if (done) return;
        done = true;
        unsubscribe?.();
        action();
      };
      api.rpc.chain
        .subscribeFinalizedHeads((header) => void check(header.number.toNumber()).catch((err) => finish(() => reject(err))))
        .then((u) => {
          unsubscribe = u;
          if (done) u();
        })
        .catch((err: Error) => finish(() => reject(err)));
    });
  }
}

/** The pool refused the extrinsic for good (bad signature, cannot pay, stale): retrying cannot help. */
export class SubmissionRejected extends Error {
  override readonly name = 'SubmissionRejected';
}

function classifySubmitError(err: Error): Error {
  // 1010: invalid transaction (payment, stale, bad proof…), 1011: unknown validity. Both are final.
  if (/^101[0-2]|Invalid Transaction|Inability to pay|Priority is too low|Transaction is outdated|stale/i.test(err.message)) {
    return new SubmissionRejected(err.message);
  }
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

function expectedBlockTimeMs(api: ApiPromise): number {
  const consts = api.consts as unknown as Record<string, Record<string, { toNumber(): number } | undefined> | undefined>;
  const babe = consts.babe?.expectedBlockTime?.toNumber();
  if (babe) return babe;
  const period = consts.timestamp?.minimumPeriod?.toNumber();
  return period ? period * 2 : 12_000;
}

