import { createHash } from 'node:crypto';
import type { Creator, CreatorRoles } from '../works/types';

/**
 * The commitment of docs/api.md#the-commitment (protocol version 1), verifiable by anyone from the audio bytes and the
 * metadata alone:
 *   commitment = SHA-256( 0x01 ‖ media_hash ‖ str(trimmed title) ‖ merkle_root(creators) )
 */
export const PROTOCOL_VERSION = 1;
export const MERKLE_DEPTH = 5;
export const MAX_CREATORS = 2 ** MERKLE_DEPTH;

const ROLE_TAGS: Record<keyof CreatorRoles, number> = { author: 0, composer: 1, arranger: 2, adapter: 3 };

const sha256 = (...parts: Buffer[]) => {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
};

/** Byte length as u32 little-endian, then the UTF-8 bytes. */
export function encodeString(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  const length = Buffer.alloc(4);
  length.writeUInt32LE(bytes.length);
  return Buffer.concat([length, bytes]);
}

/** 0x00 when absent, else 0x01 then the string encoding. */
export function encodeOptionalString(value: string | undefined): Buffer {
  return value === undefined ? Buffer.from([0]) : Buffer.concat([Buffer.from([1]), encodeString(value)]);
}

export function encodeCreator(creator: Creator): Buffer {
  const tags = [
    ...new Set((Object.keys(ROLE_TAGS) as (keyof CreatorRoles)[]).filter((r) => creator.roles[r] === true).map((r) => ROLE_TAGS[r])),
  ].sort((a, b) => a - b);
  return Buffer.concat([
    encodeString(creator.full_name),
    encodeString(creator.email ?? ''),
    Buffer.from([tags.length, ...tags]),
    encodeOptionalString(creator.ipi),
    encodeOptionalString(creator.isni),
  ]);
}

export const creatorLeaf = (creator: Creator) => sha256(encodeCreator(creator));

/** Fixed-depth (5, 32 slots) Merkle root over the creator leaves in request order. */
export function creatorsMerkleRoot(creators: readonly Creator[]): Buffer {
  if (creators.length === 0 || creators.length > MAX_CREATORS) throw new RangeError(`1 to ${MAX_CREATORS} creators`);
  const empty = sha256(Buffer.from([0]));
  let level: Buffer[] = Array.from({ length: MAX_CREATORS }, (_, i) => (i < creators.length ? creatorLeaf(creators[i]!) : empty));
  while (level.length > 1) {
    const next: Buffer[] = [];
    for (let i = 0; i < level.length; i += 2) next.push(sha256(level[i]!, level[i + 1]!));
    level = next;
  }
  return level[0]!;
}

export interface CommitmentParts {
  readonly mediaHash: Buffer;
  readonly merkleRoot: Buffer;
  readonly commitment: Buffer;
}

export function computeCommitment(mediaHash: Buffer, title: string, creators: readonly Creator[]): CommitmentParts {
  if (mediaHash.length !== 32) throw new RangeError('media hash must be 32 bytes');
  const merkleRoot = creatorsMerkleRoot(creators);
  const commitment = sha256(Buffer.from([PROTOCOL_VERSION]), mediaHash, encodeString(title.trim()), merkleRoot);
  return { mediaHash, merkleRoot, commitment };
}

export const toHex = (bytes: Buffer) => `0x${bytes.toString('hex')}`;
