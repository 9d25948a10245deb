import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { SecretBox } from '../../shared/crypto/secret-box';

describe('SecretBox (AES-256-GCM)', () => {
  const box = new SecretBox(randomBytes(32));
  const secret = randomBytes(32);

  it('round-trips and never shows the plaintext', () => {
    const sealed = box.seal(secret, 'row:1');
    expect(sealed.startsWith('v1.')).to.equal(true);
    expect(sealed).to.not.include(secret.toString('base64'));
    expect(sealed).to.not.include(secret.toString('base64url'));
    expect(box.open(sealed, 'row:1').equals(secret)).to.equal(true);
  });

  it('uses a fresh IV each time', () => {
    expect(box.seal(secret, 'a')).to.not.equal(box.seal(secret, 'a'));
  });

  it('refuses another row, another key, or a tampered ciphertext', () => {
    const sealed = box.seal(secret, 'row:1');
    expect(() => box.open(sealed, 'row:2')).to.throw();
    expect(() => new SecretBox(randomBytes(32)).open(sealed, 'row:1')).to.throw();
    const parts = sealed.split('.');
    const body = Buffer.from(parts[3]!, 'base64url');
    body[0] = body[0]! ^ 1;
    expect(() => box.open([parts[0], parts[1], parts[2], body.toString('base64url')].join('.'), 'row:1')).to.throw();
  });
});
