/**
 * The `ats` dialect: Allfeat's ATS pallet, `ats.createOnBehalf` / `ats.updateOnBehalf`.
 *
 * Source read (not copied): github.com/Allfeat/ats-sdk, `pallet-ats/src/lib.rs` (on-behalf calls, events,
 * `OnBehalfNonce` storage; commits 2a5240a and 93538b6) and `pallet-ats-primitives/src/lib.rs` (the payload
 * structs; commit e41a853). The older `pallets/ats` in Allfeat/Allfeat (ZKP `register`/`update`,
 * `ATSRegistered`/`ATSUpdated`) has no on-behalf calls and is not what this dialect targets.
 *
 * What the owner signs is the plain SCALE encoding of the pallet's payload struct, checked on chain with
 * `signature.verify(payload.encode(), owner)`. No domain-separation prefix, no `<Bytes>` wrapping, and no
 * genesis hash: the pallet binds a signature to one use through the action tag, the operator (the relayer
 * that submits and pays) and the owner's nonce instead.
 *
 *   CreateOnBehalfPayload                     UpdateOnBehalfPayload
 *   offset size field                         offset size field
 *        0    1 action (enum index, 0 Create)      0    1 action (enum index, 1 Update)
 *        1   32 commitment ([u8; 32])              1    8 ats_id (u64 LE)
 *       33    1 protocol_version (u8, > 0)         9   32 commitment ([u8; 32])
 *       34   32 operator (AccountId32)            41    1 protocol_version (u8, > 0)
 *       66    8 nonce (u64 LE)                    42   32 operator (AccountId32)
 *     = 74 bytes                                  74    8 nonce (u64 LE)
 *                                               = 82 bytes
 *
 * `nonce` must equal `ats.onBehalfNonce(owner)` (a u64, ValueQuery so 0 for a new owner); the pallet
 * increments it on every successful on-behalf call. The signature argument is the runtime's
 * `OffchainSignature`; this module assumes `MultiSignature` with `AccountId32` accounts (what the pallet's
 * default benchmark helper targets) and passes `{ Sr25519: signature }`.
 *
 * Events (named fields; the codec's `.toJSON()` gives them camelCase):
 *   AtsCreated { ats_id: u64, owner, commitment, protocol_version: u8, operator: Option<AccountId> }
 *   AtsUpdated { ats_id: u64, version: u32, commitment, protocol_version: u8, operator: Option<AccountId> }
 * Creation is always chain version 0; an update's `version` is the index of the new version (1, 2, …).
 * API version = chain version + 1. The chain's first `ats_id` is 0.
 *
 * Assumption: the pallet is named `Ats` in the runtime (section `ats` in @polkadot/api), as
 * `chooseDialect` (choose-dialect.ts) already assumes.
 */
import type { ApiPromise } from '@polkadot/api';
import type { SubmittableExtrinsic } from '@polkadot/api/types';
import { TypeRegistry } from '@polkadot/types';
import { u8aToHex } from '@polkadot/util';
import { decodeAddress } from '@polkadot/util-crypto';
import { publicKeyOf, withSeedKeypair } from '../sr25519';
import type { AnchorRequest, ExpectedAnchors, IndexedVersion, ItemAssignment, ItemEvent, RegistryDialect, VersionCheck } from '../dialect';

export const CREATE_PAYLOAD_LENGTH = 74;
export const UPDATE_PAYLOAD_LENGTH = 82;

const registry = new TypeRegistry();
registry.register({
  AtsOnBehalfAction: { _enum: ['Create', 'Update', 'Revoke'] },
  AtsCreateOnBehalfPayload: {
    action: 'AtsOnBehalfAction',
    commitment: '[u8; 32]',
    protocolVersion: 'u8',
    operator: 'AccountId32',
    nonce: 'u64',
  },
  AtsUpdateOnBehalfPayload: {
    action: 'AtsOnBehalfAction',
    atsId: 'u64',
    commitment: '[u8; 32]',
    protocolVersion: 'u8',
    operator: 'AccountId32',
    nonce: 'u64',
  },
});

/** An account as an ss58 address, a 0x hex public key, or its 32 bytes. */
export type AccountLike = string | Uint8Array;

export interface CreateOnBehalfFields {
  readonly commitment: Uint8Array;
  readonly protocolVersion: number;
  /** The relayer account that submits the call (the pallet's `operator`, the extrinsic's signer). */
  readonly operator: AccountLike;
  readonly nonce: bigint;
}

export interface UpdateOnBehalfFields extends CreateOnBehalfFields {
  /** The work's chain id. */
  readonly atsId: bigint;
}

export interface OwnerSignature {
  /** The owner's sr25519 public key (its AccountId32). */
  readonly owner: Buffer;
  readonly signature: Buffer;
}

function accountBytes(account: AccountLike): Uint8Array {
  const bytes = typeof account === 'string' ? decodeAddress(account) : account;
  if (bytes.length !== 32) throw new RangeError('an account is 32 bytes');
  return bytes;
}

function checkFields(fields: CreateOnBehalfFields): void {
  if (fields.commitment.length !== 32) throw new RangeError('commitment is 32 bytes');
  if (!Number.isInteger(fields.protocolVersion) || fields.protocolVersion < 1 || fields.protocolVersion > 255) {
    throw new RangeError('protocol version is a u8 above 0');
  }
  if (fields.nonce < 0n || fields.nonce >= 1n << 64n) throw new RangeError('nonce is a u64');
}

/** SCALE bytes of the pallet's `CreateOnBehalfPayload` (74 bytes): what the owner signs for `createOnBehalf`. */
export function encodeCreateOnBehalfPayload(fields: CreateOnBehalfFields): Buffer {
  checkFields(fields);
  const value = registry.createType('AtsCreateOnBehalfPayload', {
    action: 'Create',
    commitment: fields.commitment,
    protocolVersion: fields.protocolVersion,
    operator: accountBytes(fields.operator),
    nonce: fields.nonce,
  });
  return Buffer.from(value.toU8a());
}

/** SCALE bytes of the pallet's `UpdateOnBehalfPayload` (82 bytes): what the owner signs for `updateOnBehalf`. */
export function encodeUpdateOnBehalfPayload(fields: UpdateOnBehalfFields): Buffer {
  checkFields(fields);
  if (fields.atsId < 0n || fields.atsId >= 1n << 64n) throw new RangeError('ats_id is a u64');
  const value = registry.createType('AtsUpdateOnBehalfPayload', {
    action: 'Update',
    atsId: fields.atsId,
    commitment: fields.commitment,
    protocolVersion: fields.protocolVersion,
    operator: accountBytes(fields.operator),
    nonce: fields.nonce,
  });
  return Buffer.from(value.toU8a());
}

/** The owner's sr25519 signature over exactly `payload`; the seed is used for this call only. */
export function signOnBehalfPayload(payload: Uint8Array, ownerSeed: Uint8Array): OwnerSignature {
  return withSeedKeypair(ownerSeed, (owner, sign) => ({ owner, signature: sign(payload) }));
}

/** A u64/u32 from the codec's JSON: a number, or a hex string once it passes 52 bits. */
function toBigInt(value: unknown): bigint | undefined {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  if (typeof value === 'string' && /^(0x[0-9a-f]+|[0-9]+)$/i.test(value)) return BigInt(value);
  return undefined;
}

/** A field of an event's JSON data, by camelCase name (named form) or by position (unnamed form). */
function field(data: unknown, name: string, index: number): unknown {
  if (Array.isArray(data)) return data[index];
  if (data !== null && typeof data === 'object') return (data as Record<string, unknown>)[name];
  return undefined;
}

/** `{ atsId, version }` (API version) from an `ats.AtsCreated` / `ats.AtsUpdated` event; undefined for any other. */
export function decodeAtsEvent(event: ItemEvent): ItemAssignment | undefined {
  if (event.section !== 'ats') return undefined;
  if (event.method === 'AtsCreated') {
    const atsId = toBigInt(field(event.data, 'atsId', 0));
    if (atsId === undefined) throw new Error('ats.AtsCreated without a readable ats_id');
    return { atsId, version: 1 }; // creation is chain version 0
  }
  if (event.method === 'AtsUpdated') {
    const atsId = toBigInt(field(event.data, 'atsId', 0));
    const chainVersion = toBigInt(field(event.data, 'version', 1));
    if (atsId === undefined || chainVersion === undefined) throw new Error('ats.AtsUpdated without a readable ats_id and version');
    return { atsId, version: Number(chainVersion) + 1 };
  }
  return undefined;
}

/** The assignment from the first ATS creation/update event among an item's events; `{}` when there is none. */
export function readAtsAssignment(events: readonly ItemEvent[]): ItemAssignment {
  for (const event of events) {
    const assignment = decodeAtsEvent(event);
    if (assignment) return assignment;
  }
  return {};
}

type AtsApi = {
  query: { ats: { onBehalfNonce(owner: Uint8Array): Promise<{ toString(): string }> } };
  tx: {
    ats: {
      createOnBehalf(...args: unknown[]): SubmittableExtrinsic<'promise'>;
      updateOnBehalf(...args: unknown[]): SubmittableExtrinsic<'promise'>;
    };
  };
};

/** Has the owner sign the payload over the given nonce (else the chain's), and returns the relayer's call. */
export async function buildAtsCall(
  api: ApiPromise,
  request: AnchorRequest,
  operator: AccountLike,
): Promise<SubmittableExtrinsic<'promise'>> {
  const ats = api as unknown as AtsApi;
  const owner = publicKeyOf(request.ownerSeed);
  const nonce = request.ownerNonce ?? (await onBehalfNonce(api, owner));
  const fields = { commitment: request.commitment, protocolVersion: request.protocolVersion, operator, nonce };
  if (request.action === 'register') {
    const { signature } = signOnBehalfPayload(encodeCreateOnBehalfPayload(fields), request.ownerSeed);
    return ats.tx.ats.createOnBehalf(owner, request.commitment, request.protocolVersion, nonce, { Sr25519: u8aToHex(signature) });
  }
  const { signature } = signOnBehalfPayload(encodeUpdateOnBehalfPayload({ ...fields, atsId: request.atsId }), request.ownerSeed);
  return ats.tx.ats.updateOnBehalf(owner, request.atsId, request.commitment, request.protocolVersion, nonce, {
    Sr25519: u8aToHex(signature),
  });
}

/** The owner's on-behalf nonce in the best block's state. */
export async function onBehalfNonce(api: ApiPromise, owner: Uint8Array): Promise<bigint> {
  return BigInt((await (api as unknown as AtsApi).query.ats.onBehalfNonce(owner)).toString());
}

/** The pallet's dispatch error for a payload signed over another nonce than the owner's current one. */
export const INVALID_NONCE_ERROR = 'ats.InvalidNonce';

/**
 * The `ats` dialect's check, from the chain data alone: each version's block holds the pallet's
 * `AtsCreated` (version 1) or `AtsUpdated` (chain version = API version − 1) for this `ats_id`, with the
 * indexed commitment; the owner is the one `AtsCreated` names (an update is the pallet's only if the
 * owner's signature over its nonce was accepted, so an event is the signature's proof).
 */
export async function verifyAtsAnchors(api: ApiPromise, expected: ExpectedAnchors): Promise<VersionCheck[]> {
  const eventsOf = async (blockHash: string): Promise<ItemEvent[] | undefined> => {
    const at = await api.at(blockHash).catch(() => undefined);
    if (!at) return undefined;
    const records = (await at.query.system.events()) as unknown as {
      event: { section: string; method: string; data: { toJSON(): unknown } };
    }[];
    return records.map((r) => ({ section: r.event.section, method: r.event.method, data: r.event.data.toJSON() }));
  };
  const checks: VersionCheck[] = [];
  for (const v of expected.versions) checks.push(checkAtsVersion(await eventsOf(v.blockHash), expected, v));
  return checks;
}

/** One version's check against the events of its block (undefined: the block is not on this chain). */
export function checkAtsVersion(
  events: readonly ItemEvent[] | undefined,
  expected: { atsId: number; ownerPublicKey: string },
  v: IndexedVersion,
): VersionCheck {
  const base = { version: v.version, block_hash: v.blockHash, tx_hash: v.txHash };
  const none = { found: false, commitment: false, ats_id: false, version_number: false, owner: false, signature: false };
  if (!events) return { ...base, ...none, problem: 'its block is not on this chain' };
  const mine = events.filter((e) => {
    const a = decodeAtsEvent(e);
    return a !== undefined && a.atsId === BigInt(expected.atsId) && a.version === v.version;
  });
  const event = mine[0];
  if (!event)
    return {
      ...base,
      ...none,
      problem: `no ats.${v.version === 1 ? 'AtsCreated' : 'AtsUpdated'} for this ats_id and version in its block`,
    };
  const data = event.data as Record<string, unknown> | unknown[];
  const field = (name: string, index: number) => (Array.isArray(data) ? data[index] : (data as Record<string, unknown>)[name]);
  const commitment = String(field('commitment', 2)).toLowerCase(); // third in both events
  const owner = event.method === 'AtsCreated' ? String(field('owner', 1)) : undefined;
  return {
    ...base,
    found: true,
    commitment: commitment === v.commitment.toLowerCase(),
    ats_id: true,
    version_number: true,
    // an update names no owner: the creation's (checked as version 1) is the work's
    owner: owner === undefined ? true : sameAccount(owner, expected.ownerPublicKey),
    signature: true,
  };
}

/** An account from an event (hex public key, or ss58) against a 0x public key. */
function sameAccount(account: string, publicKeyHex: string): boolean {
  if (/^0x[0-9a-f]{64}$/i.test(account)) return account.toLowerCase() === publicKeyHex.toLowerCase();
  try {
    return `0x${Buffer.from(decodeAddress(account)).toString('hex')}` === publicKeyHex.toLowerCase();
  } catch {
    return false;
  }
}

/** Allfeat's ATS pallet: the chain assigns `ats_id` and the version; see the layout at the top of this file. */
export const atsDialect: RegistryDialect = {
  name: 'ats',
  buildCall: async (api, request, relayer) => (await buildAtsCall(api, request, relayer)).method.toHex(),
  readAssignment: readAtsAssignment,
  verify: verifyAtsAnchors,
};
