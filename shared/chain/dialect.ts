import type { ApiPromise } from '@polkadot/api';
import type { SubmittableExtrinsic } from '@polkadot/api/types';
import { encodeSignedAnchor, type AnchorFields } from './remark-payload';
import { atsDialect } from './ats';

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

/** How works are anchored on a given runtime; chosen from its metadata by `chooseDialect`. */
export interface RegistryDialect {
  readonly name: 'remark' | 'ats';
  /**
   * The call the relayer puts in its batch for one request; the owner's signature is inside it (over a
   * payload that may name the relayer account that will submit it).
   */
  buildCall(api: ApiPromise, request: AnchorRequest, relayer: string): Promise<SubmittableExtrinsic<'promise'>>;
  /** What the chain assigned to the item, from the events it emitted. */
  readAssignment(events: readonly ItemEvent[]): ItemAssignment;
}

/** Any Substrate chain: `system.remarkWithEvent` carrying the documented payload (docs/remark-anchor.md). */
export const remarkDialect: RegistryDialect = {
  name: 'remark',
  async buildCall(api, request) {
    const payload = encodeSignedAnchor(request, request.ownerSeed, Buffer.from(api.genesisHash.toU8a()));
    // hex, so the bytes are taken as the remark itself rather than as SCALE-encoded Bytes
    return api.tx.system.remarkWithEvent(`0x${payload.toString('hex')}`);
  },
  readAssignment: () => ({}),
};

/** `ats` when the runtime has the ATS pallet's `createOnBehalf`, else `remark`. */
export function chooseDialect(api: ApiPromise): RegistryDialect {
  const hasAts = typeof (api.tx as unknown as Record<string, Record<string, unknown> | undefined>).ats?.createOnBehalf === 'function';
  return hasAts ? atsDialect : remarkDialect;
}
