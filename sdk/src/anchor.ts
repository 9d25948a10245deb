/// <reference types="node" />
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
  /** The commitment protocol version (1: contract §5). */
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

/** What the anchor must match: the registration's (or version's) audio and metadata as sent. */
export interface AnchorExpectation {
  readonly audio: AudioSource;
  /** The work's title as sent at init (a version carries the work's title). */
  readonly title: string;
  readonly creators: readonly Creator[];
  /** When given, the anchor must name this ats_id. */
  readonly atsId?: number;
  /** When given, the anchor must name this version. */
  readonly version?: number;
  /**
   * Checks the owner's signature, and with it that the anchor was made for the chain of `genesisHash`. The
   * payload names its chain only inside that signature, and sr25519 is not in `node:crypto`: without a
   * verifier the signature, and so the chain, is left unchecked (`signatureChecked: false` in the result).
   */
  readonly verifySignature?: Sr25519Verify;
}

/** A checked anchor: its fields, and whether the owner's signature (and so the chain) was checked. */
export interface VerifiedAnchor extends RemarkAnchor {
  /** True when `verifySignature` was given and the signature holds for this genesis hash. */
  readonly signatureChecked: boolean;
  /** The message the owner signed: bytes 0–83 ‖ genesis hash, for a caller that checks it elsewhere. */
  readonly signedMessage: Uint8Array;
}

/** Why an anchor was refused. */
export type AnchorVerificationFailure =
  /** Not 148 bytes, not the `WRKS` magic, a layout other than 1, or a field out of range. */
  | 'malformed_payload'
  /** A commitment protocol version this library cannot recompute. */
  | 'unsupported_protocol'
  /** `genesisHash` is not 32 bytes. */
  | 'invalid_genesis_hash'
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
  return {
    action: bytes[5] === 0 ? 'register' : 'update',
    network: bytes[6] === 0 ? 'testnet' : 'mainnet',
    protocolVersion: bytes[7]!,
    atsId: Number(atsId),
    version: bytes.readUInt32LE(16),
    commitment: hex(bytes.subarray(20, 52)),
    owner: hex(bytes.subarray(52, 84)),
    signature: hex(bytes.subarray(84, PAYLOAD_LENGTH)),
    signedPrefix: Uint8Array.from(bytes.subarray(0, SIGNED_LENGTH)),
  };
}

/**
 * Checks a `remark` anchor against the audio and metadata you hold: decodes it, recomputes the commitment
 * (contract §5) and compares; checks the ats_id and version when you name them; and, given an sr25519
 * verifier, checks the owner's signature over the payload and `genesisHash`, which proves the anchor was
 * made by its owner for that chain.
 *
 * @param remark the remark's bytes, or their `0x` hex
 * @param genesisHash the chain's genesis hash (32 bytes, or `0x` hex)
 * @throws {@link AnchorVerificationError} naming the check that failed
 */
export async function verifyAnchor(
  remark: Uint8Array | string,
  genesisHash: Uint8Array | string,
  expected: AnchorExpectation,
): Promise<VerifiedAnchor> {
  const genesis = toBytes(genesisHash);
  if (genesis === undefined || genesis.length !== 32) {
    throw new AnchorVerificationError('invalid_genesis_hash', 'the genesis hash is 32 bytes (or 0x + 64 hex digits)');
  }
  const anchor = decodeRemarkAnchor(remark);
  if (anchor.protocolVersion !== COMMITMENT_PROTOCOL_VERSION) {
    throw new AnchorVerificationError('unsupported_protocol', `commitment protocol ${anchor.protocolVersion} is not known here`);
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
  const signedMessage = Buffer.concat([anchor.signedPrefix, genesis]);
  let signatureChecked = false;
  if (expected.verifySignature) {
    let valid: boolean;
    try {
      valid = await expected.verifySignature(
        signedMessage,
        Buffer.from(anchor.signature.slice(2), 'hex'),
        Buffer.from(anchor.owner.slice(2), 'hex'),
      );
    } catch {
      valid = false; // bytes that are not a curve point or a signature at all
    }
    if (valid !== true) {
      throw new AnchorVerificationError(
        'signature_invalid',
        "the owner's signature does not hold over this anchor and genesis hash: made for another chain, or not by its owner",
      );
    }
    signatureChecked = true;
  }
  return { ...anchor, signatureChecked, signedMessage: Uint8Array.from(signedMessage) };
}

/** Bytes as given, or decoded from `0x` hex; `undefined` for a string that is not `0x` hex. */
function toBytes(value: Uint8Array | string): Buffer | undefined {
  if (typeof value !== 'string') return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  return /^0x(?:[0-9a-fA-F]{2})*$/.test(value) ? Buffer.from(value.slice(2), 'hex') : undefined;
}

const malformed = (detail: string) => new AnchorVerificationError('malformed_payload', `not a works-api anchor: ${detail}`);
const hex = (bytes: Uint8Array) => `0x${Buffer.from(bytes).toString('hex')}`;
