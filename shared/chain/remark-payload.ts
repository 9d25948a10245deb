import { sr25519Verify } from '@polkadot/util-crypto';
import { withSeedKeypair } from './sr25519';
import type { Network } from '../config';

/**
 * The `remark` dialect's payload (layout 1), carried by `system.remarkWithEvent`. Little-endian integers:
 *
 *   offset size  field
 *        0    4  magic "WRKS"
 *        4    1  layout version (1)
 *        5    1  action (0 register, 1 update)
 *        6    1  network (0 testnet, 1 mainnet)
 *        7    1  commitment protocol version (docs/api.md#the-commitment; 1)
 *        8    8  ats_id (u64)
 *       16    4  version (u32; the registration is 1)
 *       20   32  commitment
 *       52   32  owner sr25519 public key
 *       84   64  owner sr25519 signature over bytes 0..84 ‖ the chain's genesis hash (32 bytes)
 *
 * 148 bytes in all. The genesis hash in the signed message stops a payload being replayed on another chain.
 */
export const MAGIC = Buffer.from('WRKS', 'ascii');
export const LAYOUT_VERSION = 1;
export const PAYLOAD_LENGTH = 148;
const SIGNED_LENGTH = 84;

export type AnchorAction = 'register' | 'update';

export interface AnchorFields {
  readonly action: AnchorAction;
  readonly network: Network;
  readonly protocolVersion: number;
  readonly atsId: bigint;
  readonly version: number;
  readonly commitment: Buffer;
  readonly ownerPublicKey: Buffer;
}

export interface DecodedAnchor extends AnchorFields {
  readonly signature: Buffer;
  /** The bytes the owner signed, without the genesis hash. */
  readonly signedPrefix: Buffer;
}

function header(fields: AnchorFields): Buffer {
  if (fields.commitment.length !== 32 || fields.ownerPublicKey.length !== 32) throw new RangeError('commitment and owner key are 32 bytes');
  const out = Buffer.alloc(SIGNED_LENGTH);
  MAGIC.copy(out, 0);
  out.writeUInt8(LAYOUT_VERSION, 4);
  out.writeUInt8(fields.action === 'register' ? 0 : 1, 5);
  out.writeUInt8(fields.network === 'testnet' ? 0 : 1, 6);
  out.writeUInt8(fields.protocolVersion, 7);
  out.writeBigUInt64LE(fields.atsId, 8);
  out.writeUInt32LE(fields.version, 16);
  fields.commitment.copy(out, 20);
  fields.ownerPublicKey.copy(out, 52);
  return out;
}

/**
 * The payload with neither owner key nor signature (both zero): a quote's, the length and kind of the signed
 * one (a chain reads nothing of a remark), never submitted.
 */
export function encodeUnsignedAnchor(fields: Omit<AnchorFields, 'ownerPublicKey'>): Buffer {
  return Buffer.concat([header({ ...fields, ownerPublicKey: Buffer.alloc(32) }), Buffer.alloc(PAYLOAD_LENGTH - SIGNED_LENGTH)]);
}

/** Encodes and signs with the owner's seed; the seed is used for this call only. */
export function encodeSignedAnchor(fields: Omit<AnchorFields, 'ownerPublicKey'>, ownerSeed: Buffer, genesisHash: Buffer): Buffer {
  return withSeedKeypair(ownerSeed, (ownerPublicKey, sign) => {
    const prefix = header({ ...fields, ownerPublicKey });
    return Buffer.concat([prefix, sign(Buffer.concat([prefix, genesisHash]))]);
  });
}

export function decodeAnchor(bytes: Buffer): DecodedAnchor {
  if (bytes.length !== PAYLOAD_LENGTH || !bytes.subarray(0, 4).equals(MAGIC) || bytes[4] !== LAYOUT_VERSION) {
    throw new Error('not a works-api anchor payload (layout 1)');
  }
  return {
    action: bytes[5] === 0 ? 'register' : 'update',
    network: bytes[6] === 0 ? 'testnet' : 'mainnet',
    protocolVersion: bytes[7]!,
    atsId: bytes.readBigUInt64LE(8),
    version: bytes.readUInt32LE(16),
    commitment: bytes.subarray(20, 52),
    ownerPublicKey: bytes.subarray(52, 84),
    signature: bytes.subarray(84, 148),
    signedPrefix: bytes.subarray(0, SIGNED_LENGTH),
  };
}

/** False for a bad signature and for bytes that are not a valid public key or signature at all. */
export function verifyAnchorSignature(anchor: DecodedAnchor, genesisHash: Buffer): boolean {
  try {
    return sr25519Verify(Buffer.concat([anchor.signedPrefix, genesisHash]), anchor.signature, anchor.ownerPublicKey);
  } catch {
    return false;
  }
}
