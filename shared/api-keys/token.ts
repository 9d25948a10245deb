import { hash, randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API key tokens (docs/api.md#api-keys): `wrk_live_` + 40 base62 characters, the last 6 of which are the CRC32 of
 * everything before them in base62. A mistyped token is refused without a database lookup, and secret
 * scanners can recognise a real one.
 */
export const TOKEN_PREFIX = 'wrk_live_';
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 34;
const CHECKSUM_LENGTH = 6;
const TOKEN_SHAPE = /^wrk_live_[0-9A-Za-z]{40}$/;

export function base62(value: number, width: number): string {
  let out = '';
  let rest = value;
  do {
    out = ALPHABET[rest % 62] + out;
    rest = Math.floor(rest / 62);
  } while (rest > 0);
  return out.padStart(width, '0');
}

export function checksumOf(body: string): string {
  return base62(crc32(body) >>> 0, CHECKSUM_LENGTH);
}

export function generateToken(): string {
  let random = '';
  for (let i = 0; i < RANDOM_LENGTH; i++) random += ALPHABET[randomInt(62)];
  const body = TOKEN_PREFIX + random;
  return body + checksumOf(body);
}

export function isWellFormedToken(token: string): boolean {
  if (!TOKEN_SHAPE.test(token)) return false;
  const body = token.slice(0, -CHECKSUM_LENGTH);
  return checksumOf(body) === token.slice(-CHECKSUM_LENGTH);
}

/** SHA-256 of the token, one-shot (`crypto.hash`: no Hash object per request). */
export function hashToken(token: string): Buffer {
  return hash('sha256', token, 'buffer');
}

/** The part of a token shown in listings (docs/api.md#api-keys: its first 16 characters). */
export const tokenPrefix = (token: string) => token.slice(0, 16);
