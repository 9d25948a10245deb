import type { ApiPromise } from '@polkadot/api';
import type { AnchorFields } from './remark-payload';

/**
 * One registration or version to anchor (`atsId`: assigned by the service for remark, the work's chain id
 * for ats updates; `version`: the API's, the registration is 1), with the owner's wallet seed for the
 * signature inside the call.
 */
export interface AnchorRequest extends Omit<AnchorFields, 'ownerPublicKey'> {
  readonly ownerSeed: Buffer;
  /** `ats` only: the owner nonce to sign over (nonces.ts); the chain's current value when absent. */
  readonly ownerNonce?: bigint;
}

/** An event emitted by one batch item, in a plain form (`data` as the codec's JSON). */
export interface ItemEvent {
  readonly section: string;
  readonly method: string;
  readonly data: unknown;
}

/** What the chain assigned to an item, read from its events; the remark dialect assigns nothing. */
export interface ItemAssignment {
  readonly atsId?: bigint;
  /** API version (the chain's version + 1 for `ats`). */
  readonly version?: number;
}

export interface IndexedVersion {
  readonly version: number;
  readonly commitment: string;
  readonly blockHash: string;
  readonly txHash: string;
}

/** What the index says a work's versions should be on chain: its id, its owner's key, each version. */
export interface ExpectedAnchors {
  readonly atsId: number;
  readonly ownerPublicKey: string;
  readonly versions: readonly IndexedVersion[];
}

export interface VersionCheck {
  readonly version: number;
  readonly block_hash: string;
  readonly tx_hash: string;
  readonly found: boolean;
  readonly commitment: boolean;
  readonly ats_id: boolean;
  readonly version_number: boolean;
  readonly owner: boolean;
  readonly signature: boolean;
  readonly problem?: string;
}

/** How works are anchored on a given runtime; chosen from its metadata (choose-dialect.ts). */
export interface RegistryDialect {
  readonly name: 'remark' | 'ats';
  /**
   * The call the relayer puts in its batch for one request, SCALE-encoded (hex); the owner's signature is inside
   * it (over a payload that may name the relayer account that will submit it).
   */
  buildCall(api: ApiPromise, request: AnchorRequest, relayer: string): Promise<string>;
  /**
   * A call of the same kind, length and weight as `buildCall`'s, for a quote, when the chain reads nothing the
   * owner signs (remark): no seed is opened and nothing signed for it. Absent when the chain checks the owner's
   * signature (ats): a quote then signs as the call will.
   */
  quoteCall?(api: ApiPromise, request: Omit<AnchorRequest, 'ownerSeed' | 'ownerNonce'>): string;
  /** What the chain assigned to the item, from the events it emitted. */
  readAssignment(events: readonly ItemEvent[]): ItemAssignment;
  /** Each indexed version checked against the chain data alone, in this dialect's terms. */
  verify(api: ApiPromise, expected: ExpectedAnchors): Promise<VersionCheck[]>;
}
