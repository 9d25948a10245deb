import { expect } from 'chai';
import { crc32 } from 'node:zlib';
import { generateToken, isWellFormedToken, hashToken, tokenPrefix, base62 } from '../../shared/api-keys/token';

describe('API key tokens (docs/api.md#api-keys)', () => {
  it('have the wrk_live_ prefix and 40 base62 characters', () => {
    for (let i = 0; i < 50; i++) expect(generateToken()).to.match(/^wrk_live_[0-9A-Za-z]{40}$/);
  });

  it('end in a 6-character base62 CRC32 of everything before the checksum', () => {
    const token = generateToken();
    const body = token.slice(0, -6);
    // independent base62 of the CRC32, most significant digit first
    const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    let n = crc32(body) >>> 0;
    let digits = '';
    for (let i = 0; i < 6; i++) {
      digits = alphabet[n % 62] + digits;
      n = Math.floor(n / 62);
    }
    expect(token.slice(-6)).to.equal(digits);
    expect(isWellFormedToken(token)).to.equal(true);
  });

  it('refuses a token with one character changed, truncated or of the wrong prefix', () => {
    const token = generateToken();
    const swapped = token.slice(0, 20) + (token[20] === 'a' ? 'b' : 'a') + token.slice(21);
    expect(isWellFormedToken(swapped)).to.equal(false);
    expect(isWellFormedToken(token.slice(0, -1))).to.equal(false);
    expect(isWellFormedToken(token.replace('wrk_live_', 'wrk_test_'))).to.equal(false);
  });

  it('hash with SHA-256 and expose only the first 16 characters as prefix', () => {
    const token = generateToken();
    expect(hashToken(token).toString('hex')).to.have.length(64);
    expect(tokenPrefix(token)).to.equal(token.slice(0, 16)).and.to.have.length(16);
    expect(base62(61, 2)).to.equal('0z');
  });
});
