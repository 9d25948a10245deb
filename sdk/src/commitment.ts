/// <reference types="node" />
import { createHash } from 'node:crypto';

/**
 * The commitment of protocol version 1 (docs/api.md#the-commitment), computed here from the contract's text alone so that a
 * partner can check what the service anchored without trusting it.
 */

/** A creator's roles, as in the API (a role left out is false). */
export interface CreatorRoles {
  readonly author?: boolean;
  readonly composer?: boolean;
  readonly arranger?: boolean;
  readonly adapter?: boolean;
}

/**
 * A creator as the API takes it at init, or as its creators route returns it (where an absent field is
 * null: null and absent are the same here).
 */
export interface Creator {
  readonly full_name: string;
  readonly email?: string | null;
  readonly roles: CreatorRoles;
  readonly ipi?: string | null;
  readonly isni?: string | null;
}

/**
 * The audio, as upload takes it: its bytes (a `Uint8Array`/`Buffer`, an `ArrayBuffer` or any view of one), a
 * `Blob` (a web `File` too), or a stream of bytes (a Node Readable, a web ReadableStream, any async iterable).
 */
export type AudioSource = Uint8Array | ArrayBuffer | ArrayBufferView | Blob | AsyncIterable<Uint8Array>;

/** The commitment and its two parts, each `0x` + 64 lowercase hex digits. */
export interface Commitment {
  /** SHA-256(0x01 ‖ media_hash ‖ str(trimmed title) ‖ merkle_root): what the chain holds. */
  readonly commitment: string;
  /** SHA-256 of the audio bytes. */
  readonly mediaHash: string;
  /** The root of the depth-5 Merkle tree over the creators' leaves. */
  readonly merkleRoot: string;
}

/** The commitment protocol version this module computes (byte 7 of a `remark` anchor). */
export const COMMITMENT_PROTOCOL_VERSION = 1;
/** The tree has 2^5 slots: at most 32 creators. */
export const MAX_CREATORS = 32;
const DEPTH = 5;
/** Role tags, in tag order. */
const ROLES = ['author', 'composer', 'arranger', 'adapter'] as const;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Computes the commitment the service quotes at prepare and anchors on chain for this audio and metadata.
 *
 * The title is trimmed as the service trims it (`String.prototype.trim`: Unicode white space and line
 * terminators); every other string is encoded as given. Nothing is Unicode-normalized: a title in NFC and the
 * same title in NFD (`é` as one code point or as `e` + U+0301) have different commitments, so pass exactly
 * the text that was sent. Creators are taken in the order of the request.
 *
 * @param audio the audio file's bytes, a `Blob`, or a stream of bytes (read once, to the end)
 * @param title the title as sent at init (trimmed here)
 * @param creators 1 to 32 creators, in request order
 * @throws RangeError for input the service refuses and the contract does not define a commitment for: empty
 *   audio, no creator or more than 32, a string with an unpaired UTF-16 surrogate (it has no UTF-8 encoding)
 */
export async function computeCommitment(audio: AudioSource, title: string, creators: readonly Creator[]): Promise<Commitment> {
  const merkleRoot = creatorsRoot(creators);
  const trimmed = title.trim();
  const mediaHash = await sha256Of(audio);
  const commitment = sha256(Buffer.of(COMMITMENT_PROTOCOL_VERSION), mediaHash, str(trimmed, 'title'), merkleRoot);
  return { commitment: hex(commitment), mediaHash: hex(mediaHash), merkleRoot: hex(merkleRoot) };
}

/** The Merkle root over the creators' leaves (docs/api.md#the-commitment), as bytes. */
function creatorsRoot(creators: readonly Creator[]): Buffer {
  if (creators.length < 1 || creators.length > MAX_CREATORS) throw new RangeError(`1 to ${MAX_CREATORS} creators, not ${creators.length}`);
  const empty = sha256(Buffer.of(0));
  let level = Array.from({ length: 2 ** DEPTH }, (_, i) => (i < creators.length ? sha256(encodeCreator(creators[i]!, i)) : empty));
  while (level.length > 1) level = Array.from({ length: level.length / 2 }, (_, i) => sha256(level[2 * i]!, level[2 * i + 1]!));
  return level[0]!;
}

/** str(full_name) ‖ str(email or "") ‖ count ‖ role tags ascending ‖ opt(ipi) ‖ opt(isni). */
function encodeCreator(creator: Creator, index = 0): Buffer {
  const at = `creators[${index}]`;
  const tags = ROLES.flatMap((role, tag) => (creator.roles[role] === true ? [tag] : []));
  return Buffer.concat([
    str(creator.full_name, `${at}.full_name`),
    str(creator.email ?? '', `${at}.email`),
    Buffer.of(tags.length, ...tags),
    opt(creator.ipi, `${at}.ipi`),
    opt(creator.isni, `${at}.isni`),
  ]);
}

/** u32 little-endian byte length ‖ UTF-8 bytes. */
function str(value: string, what: string): Buffer {
  if (LONE_SURROGATE.test(value)) throw new RangeError(`${what} has an unpaired UTF-16 surrogate: it has no UTF-8 encoding`);
  const bytes = Buffer.from(value, 'utf8');
  const length = Buffer.alloc(4);
  length.writeUInt32LE(bytes.length, 0);
  return Buffer.concat([length, bytes]);
}

/** 0x00 when absent, else 0x01 ‖ str(value). */
function opt(value: string | null | undefined, what: string): Buffer {
  return value == null ? Buffer.of(0) : Buffer.concat([Buffer.of(1), str(value, what)]);
}

async function sha256Of(audio: AudioSource): Promise<Buffer> {
  const hash = createHash('sha256');
  let size = 0;
  if (ArrayBuffer.isView(audio) || audio instanceof ArrayBuffer) {
    const bytes = ArrayBuffer.isView(audio) ? new Uint8Array(audio.buffer, audio.byteOffset, audio.byteLength) : new Uint8Array(audio);
    hash.update(bytes);
    size = bytes.length;
  } else {
    // a Blob is read as a stream: a large File need not be in memory
    const chunks: AsyncIterable<unknown> = isBlob(audio) ? (audio.stream() as unknown as AsyncIterable<Uint8Array>) : audio;
    for await (const chunk of chunks) {
      if (!(chunk instanceof Uint8Array)) throw new TypeError('an audio stream must yield bytes (set no encoding on it)');
      hash.update(chunk);
      size += chunk.length;
    }
  }
  if (size === 0) throw new RangeError('the audio is empty: the service refuses empty audio, and it has no commitment');
  return hash.digest();
}

function isBlob(value: unknown): value is Blob {
  return typeof Blob !== 'undefined' && value instanceof Blob;
}

function sha256(...parts: Uint8Array[]): Buffer {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
}

const hex = (bytes: Uint8Array) => `0x${Buffer.from(bytes).toString('hex')}`;
