/// <reference types="node" />
import { createHash } from 'node:crypto';
import { computeCommitment, COMMITMENT_PROTOCOL_VERSION, type AudioSource, type Creator } from './commitment';
import type { Network } from './webhook-events';

/**
 * The `remark` dialect's anchor (layout 1, docs/remark-anchor.md of the service), decoded and checked here
 * from the documented byte layout alone. 148 bytes, integers little-endian:
 *
 *   0 magic "WRKS" · 4 layout version (1) · 5 action (0 registration, 1 new version) · 6 network (0 testnet,
 *   1 mainnet) · 7 commitment protocol version · 8 ats_id u64 · 16 version u32 · 20 commitment (32) ·
 *   52 owner sr25519 public key (32) · 84 owner sr25519 signature (64) over bytes 0–83 ‖ genesis hash (32)
 */

/** The fields of an anchor payload. Byte strings are `0x` + lowercase hex. */
export interface RemarkAnchor {
  readonly action: 'register' | 'update';
  readonly network: Network;
  /** The commitment protocol version (1: docs/api.md#the-commitment). */
  readonly protocolVersion: number;
  readonly atsId: number;
  /** The version anchored; the registration is 1. */
  readonly version: number;
  readonly commitment: string;
  /** The owner's sr25519 public key: the organization wallet (its ss58 address is the work's `owner`). */
  readonly owner: string;
  readonly signature: string;
  /** What the owner signed, less the genesis hash: bytes 0–83. */
  readonly signedPrefix: Uint8Array;
}

/**
 * Checks an sr25519 signature (Schnorrkel, signing context "substrate"), as `sr25519Verify` of
 * `@polkadot/util-crypto` or `verify` of `@scure/sr25519` do.
 */
export type Sr25519Verify = (message: Uint8Array, signature: Uint8Array, publicKey: Uint8Array) => boolean | Promise<boolean>;

/**
 * What the anchor must match: who made it, and the registration's (or version's) audio and metadata as sent.
 * Either `verifySignature` or `unsafeSkipSignature: true` is required (a `TypeError` otherwise).
 */
export interface AnchorExpectation {
  /**
   * The organization whose anchor this must be: its wallet's sr25519 public key (`0x` + 64 hex digits), or its
   * ss58 address (the work's `owner` in the API, any network prefix). The anchor's owner key must equal it,
   * and the signature is checked against that key: without this, anyone could anchor your public commitment
   * under their own key and it would verify.
   */
  readonly owner: string;
  readonly audio: AudioSource;
  /** The work's title as sent at init (a version carries the work's title). */
  readonly title: string;
  readonly creators: readonly Creator[];
  /** When given, the anchor must name this ats_id. */
  readonly atsId?: number;
  /** When given, the anchor must name this version. */
  readonly version?: number;
  /** When given, the anchor must name this network (the payload's byte 6; the chain itself is bound by the signature). */
  readonly network?: Network;
  /**
   * Checks the owner's signature, and with it that the anchor was made by `owner` for the chain of
   * `genesisHash`. The payload names its chain only inside that signature, and sr25519 is not in
   * `node:crypto`, so the check is passed in (`sr25519Verify` of `@polkadot/util-crypto`, `verify` of
   * `@scure/sr25519`).
   */
  readonly verifySignature?: Sr25519Verify;
  /**
   * Skips the signature check. Then NEITHER the owner NOR the chain is proven: only that these bytes hold
   * the commitment of your audio and metadata and name the owner key you expect, which anyone can write.
   * The result says `signatureChecked: false` and carries a `warning`.
   */
  readonly unsafeSkipSignature?: boolean;
}

/** A checked anchor: its fields, and whether the owner's signature (and so the chain) was checked. */
export interface VerifiedAnchor extends RemarkAnchor {
  /** True when `verifySignature` was given and the owner's signature holds for this genesis hash. */
  readonly signatureChecked: boolean;
  /** Present when the signature was skipped (`unsafeSkipSignature`): what is then NOT proven. */
  readonly warning?: string;
  /** The message the owner signed: bytes 0–83 ‖ genesis hash, for a caller that checks it elsewhere. */
  readonly signedMessage: Uint8Array;
}

/** Why an anchor was refused. */
export type AnchorVerificationFailure =
  /**
   * Not 148 bytes, not the `WRKS` magic, a layout other than 1, a field out of range, or an action that
   * disagrees with the version (a registration is version 1, a new version 2 or more).
   */
  | 'malformed_payload'
  /** A commitment protocol version this library cannot recompute. */
  | 'unsupported_protocol'
  /** `genesisHash` is not 32 bytes. */
  | 'invalid_genesis_hash'
  /** `expected.owner` is not a 32-byte public key in hex, nor an ss58 address of one. */
  | 'invalid_owner'
  /** The anchor was made under another key than `expected.owner`. */
  | 'owner_mismatch'
  | 'network_mismatch'
  | 'ats_id_mismatch'
  | 'version_mismatch'
  /** The anchored commitment is not the one of this audio, title and creators. */
  | 'commitment_mismatch'
  /** The owner's signature does not hold over this payload and genesis hash: another chain, or not the owner's. */
  | 'signature_invalid';

/** Thrown by {@link verifyAnchor} and {@link decodeRemarkAnchor}; `reason` says which check failed. */
export class AnchorVerificationError extends Error {
  override readonly name = 'AnchorVerificationError';
  constructor(
    readonly reason: AnchorVerificationFailure,
    message: string,
  ) {
    super(message);
  }
}

const MAGIC = 'WRKS';
const LAYOUT_VERSION = 1;
const PAYLOAD_LENGTH = 148;
const SIGNED_LENGTH = 84;

/**
 * Decodes a remark's bytes as an anchor without checking it: to find, among the remarks of a batch, the one
 * naming an ats_id and version.
 *
 * @param remark the remark's bytes (the `system.remarkWithEvent` argument, without its length prefix), or
 *   their `0x` hex
 * @throws {@link AnchorVerificationError} `malformed_payload` when they are not an anchor of layout 1
 */
export function decodeRemarkAnchor(remark: Uint8Array | string): RemarkAnchor {
  const bytes = toBytes(remark);
  if (bytes === undefined || bytes.length !== PAYLOAD_LENGTH) throw malformed(`an anchor is ${PAYLOAD_LENGTH} bytes (or their 0x hex)`);
  if (bytes.subarray(0, 4).toString('latin1') !== MAGIC) throw malformed(`no ${MAGIC} magic`);
  if (bytes[4] !== LAYOUT_VERSION) throw malformed(`layout ${bytes[4]}, not ${LAYOUT_VERSION}`);
  if (bytes[5]! > 1 || bytes[6]! > 1) throw malformed('action and network are 0 or 1');
  const atsId = bytes.readBigUInt64LE(8);
  if (atsId > BigInt(Number.MAX_SAFE_INTEGER)) throw malformed(`ats_id ${atsId} is beyond what the API can name`);
  const version = bytes.readUInt32LE(16);
  if (bytes[5] === 0 ? version !== 1 : version < 2) {
    throw malformed(`a ${bytes[5] === 0 ? 'registration' : 'new version'} cannot be version ${version}`);
  }
  return {
    action: bytes[5] === 0 ? 'register' : 'update',
    network: bytes[6] === 0 ? 'testnet' : 'mainnet',
    protocolVersion: bytes[7]!,
    atsId: Number(atsId),
    version,
    commitment: hex(bytes.subarray(20, 52)),
    owner: hex(bytes.subarray(52, 84)),
    signature: hex(bytes.subarray(84, PAYLOAD_LENGTH)),
    signedPrefix: Uint8Array.from(bytes.subarray(0, SIGNED_LENGTH)),
  };
}

/**
 * Checks a `remark` anchor against the organization and the audio and metadata you hold.
 *
 * In order: the genesis hash is 32 bytes; `expected.owner` is a key (or an ss58 address); `verifySignature`
 * or `unsafeSkipSignature` was given; the payload is a layout-1 anchor whose action agrees with its version;
 * its commitment protocol is 1; its owner key is `expected.owner`; it names `network`, `atsId` and
 * `version` when you give them; its commitment is the one recomputed (docs/api.md#the-commitment) from your audio and
 * metadata; and the owner's sr25519 signature holds over bytes 0–83 ‖ `genesisHash`.
 *
 * What a success proves: the holder of `expected.owner`'s key signed this commitment of this audio and
 * metadata, for this ats_id and version, for the chain of `genesisHash` (the payload names its chain only
 * inside that signature). What it does not prove: that the remark is on that chain, or final — read it from
 * a finalized block of a node you trust, and take `genesisHash` from that node; nor that no other anchor names
 * the same ats_id and version. With `unsafeSkipSignature`, neither the owner nor the chain is proven.
 *
 * @param remark the remark's bytes, or their `0x` hex
 * @param genesisHash the chain's genesis hash (32 bytes, or `0x` hex)
 * @throws {@link AnchorVerificationError} naming the check that failed
 * @throws TypeError when neither `verifySignature` nor `unsafeSkipSignature: true` is given
 */
export async function verifyAnchor(
  remark: Uint8Array | string,
  genesisHash: Uint8Array | string,
  expected: AnchorExpectation,
): Promise<VerifiedAnchor> {
  const verify = expected.verifySignature;
  if (typeof verify !== 'function' && expected.unsafeSkipSignature !== true) {
    throw new TypeError(
      'verifyAnchor needs verifySignature (e.g. sr25519Verify of @polkadot/util-crypto) to prove the owner and the chain; ' +
        'pass unsafeSkipSignature: true to check the commitment alone',
    );
  }
  const genesis = toBytes(genesisHash);
  if (genesis === undefined || genesis.length !== 32) {
    throw new AnchorVerificationError('invalid_genesis_hash', 'the genesis hash is 32 bytes (or 0x + 64 hex digits)');
  }
  const owner = ownerKey(expected.owner);
  if (owner === undefined) {
    throw new AnchorVerificationError(
      'invalid_owner',
      'the expected owner is a 32-byte public key (0x + 64 hex digits) or its ss58 address',
    );
  }
  const anchor = decodeRemarkAnchor(remark);
  if (anchor.protocolVersion !== COMMITMENT_PROTOCOL_VERSION) {
    throw new AnchorVerificationError('unsupported_protocol', `commitment protocol ${anchor.protocolVersion} is not known here`);
  }
  if (anchor.owner !== owner) {
    throw new AnchorVerificationError('owner_mismatch', `the anchor was made under the key ${anchor.owner}, not ${owner}`);
  }
  if (expected.network !== undefined && anchor.network !== expected.network) {
    throw new AnchorVerificationError('network_mismatch', `the anchor names ${anchor.network}, not ${expected.network}`);
  }
  if (expected.atsId !== undefined && anchor.atsId !== expected.atsId) {
    throw new AnchorVerificationError('ats_id_mismatch', `the anchor names ats_id ${anchor.atsId}, not ${expected.atsId}`);
  }
  if (expected.version !== undefined && anchor.version !== expected.version) {
    throw new AnchorVerificationError('version_mismatch', `the anchor names version ${anchor.version}, not ${expected.version}`);
  }
  const { commitment } = await computeCommitment(expected.audio, expected.title, expected.creators);
  if (commitment !== anchor.commitment) {
    throw new AnchorVerificationError(
      'commitment_mismatch',
      `the anchor holds ${anchor.commitment}; this audio and metadata give ${commitment}`,
    );
  }
  const signedMessage = Uint8Array.from(Buffer.concat([anchor.signedPrefix, genesis]));
  if (typeof verify !== 'function') {
    return { ...anchor, signatureChecked: false, warning: SKIPPED_WARNING, signedMessage };
  }
  let valid: boolean;
  try {
    valid = await verify(signedMessage, Buffer.from(anchor.signature.slice(2), 'hex'), Buffer.from(owner.slice(2), 'hex'));
  } catch {
    valid = false; // bytes that are not a curve point or a signature at all
  }
  if (valid !== true) {
    throw new AnchorVerificationError(
      'signature_invalid',
      "the owner's signature does not hold over this anchor and genesis hash: made for another chain, or not by its owner",
    );
  }
  return { ...anchor, signatureChecked: true, signedMessage };
}

const SKIPPED_WARNING =
  'UNSAFE: the signature was not checked (unsafeSkipSignature). Neither the owner nor the chain is proven: anyone can write these bytes.';

/**
 * The expected owner as `0x` + 64 lowercase hex: given so, or decoded from an ss58 address (base58 of
 * prefix ‖ key ‖ the first 2 bytes of BLAKE2b-512("SS58PRE" ‖ prefix ‖ key)). Hand-written because it is
 * 20 lines over `node:crypto`'s blake2b512, and the library takes no dependency.
 */
function ownerKey(owner: string): string | undefined {
  if (typeof owner !== 'string') return undefined;
  if (/^0x[0-9a-fA-F]{64}$/.test(owner)) return owner.toLowerCase();
  const bytes = base58(owner);
  // a 1-byte prefix (0–63) gives 35 bytes, a 2-byte prefix (its first byte 64–127) 36
  if (bytes === undefined || !(bytes.length === 35 ? bytes[0]! < 64 : bytes.length === 36 && bytes[0]! >= 64 && bytes[0]! < 128)) {
    return undefined;
  }
  const body = bytes.subarray(0, bytes.length - 2);
  const checksum = createHash('blake2b512').update('SS58PRE').update(body).digest();
  if (!checksum.subarray(0, 2).equals(bytes.subarray(bytes.length - 2))) return undefined;
  return hex(body.subarray(body.length - 32));
}

const BASE58_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** Bitcoin-alphabet base58 to bytes (leading `1`s are zero bytes); `undefined` for any other character. */
function base58(text: string): Buffer | undefined {
  if (text.length === 0 || text.length > 64) return undefined;
  let value = 0n;
  for (const char of text) {
    const digit = BASE58_ALPHABET.indexOf(char);
    if (digit < 0) return undefined;
    value = value * 58n + BigInt(digit);
  }
  const digits = value === 0n ? '' : value.toString(16);
  const zeros = text.length - text.replace(/^1+/, '').length;
  return Buffer.concat([Buffer.alloc(zeros), Buffer.from(digits.padStart(digits.length + (digits.length % 2), '0'), 'hex')]);
}

/** Bytes as given, or decoded from `0x` hex; `undefined` for a string that is not `0x` hex. */
function toBytes(value: Uint8Array | string): Buffer | undefined {
  if (typeof value !== 'string') return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  return /^0x(?:[0-9a-fA-F]{2})*$/.test(value) ? Buffer.from(value.slice(2), 'hex') : undefined;
}

const malformed = (detail: string) => new AnchorVerificationError('malformed_payload', `not a works-api anchor: ${detail}`);
const hex = (bytes: Uint8Array) => `0x${Buffer.from(bytes).toString('hex')}`;
