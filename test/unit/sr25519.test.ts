import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { cryptoWaitReady, sr25519PairFromSeed, sr25519Verify } from '@polkadot/util-crypto';
import { publicKeyOf, withSeedKeypair } from '../../shared/chain/sr25519';

describe('owner keys (sr25519 in WebAssembly)', () => {
  before(() => cryptoWaitReady());

  it("gives util-crypto's public key for a seed, and signatures util-crypto verifies", () => {
    for (let i = 0; i < 20; i++) {
      const seed = randomBytes(32);
      const message = randomBytes(1 + i * 7);
      const [publicKey, signature] = withSeedKeypair(seed, (key, sign) => [key, sign(message)] as const);
      expect(publicKey.equals(Buffer.from(sr25519PairFromSeed(seed).publicKey))).to.equal(true);
      expect(publicKeyOf(seed).equals(publicKey)).to.equal(true);
      expect(signature).to.have.length(64);
      expect(sr25519Verify(message, signature, publicKey)).to.equal(true);
      const altered = Buffer.from(message);
      altered[0]! ^= 1;
      expect(sr25519Verify(altered, signature, publicKey)).to.equal(false);
    }
  });
});
