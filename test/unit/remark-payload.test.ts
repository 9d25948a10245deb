import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { cryptoWaitReady, sr25519PairFromSeed } from '@polkadot/util-crypto';
import { encodeSignedAnchor, decodeAnchor, verifyAnchorSignature, PAYLOAD_LENGTH } from '../../shared/chain/remark-payload';

describe('remark payload (layout 1)', () => {
  before(() => cryptoWaitReady());
  const seed = randomBytes(32);
  const genesis = randomBytes(32);
  const commitment = randomBytes(32);
  const fields = { action: 'update' as const, network: 'mainnet' as const, protocolVersion: 1, atsId: 258n, version: 3, commitment };

  it('lays the fields out at the documented offsets', () => {
    const bytes = encodeSignedAnchor(fields, seed, genesis);
    expect(bytes).to.have.length(PAYLOAD_LENGTH).and.to.have.length(148);
    expect(bytes.subarray(0, 4).toString('ascii')).to.equal('WRKS');
    expect([bytes[4], bytes[5], bytes[6], bytes[7]]).to.deep.equal([1, 1, 1, 1]);
    expect(bytes.subarray(8, 16).toString('hex')).to.equal('0201000000000000'); // 258 as u64 LE
    expect(bytes.subarray(16, 20).toString('hex')).to.equal('03000000');
    expect(bytes.subarray(20, 52).equals(commitment)).to.equal(true);
    expect(bytes.subarray(52, 84).equals(Buffer.from(sr25519PairFromSeed(seed).publicKey))).to.equal(true);
  });

  it('decodes what it encodes, and the owner signature verifies against the genesis hash only', () => {
    const decoded = decodeAnchor(encodeSignedAnchor(fields, seed, genesis));
    expect(decoded).to.deep.include({ action: 'update', network: 'mainnet', protocolVersion: 1, atsId: 258n, version: 3 });
    expect(verifyAnchorSignature(decoded, genesis)).to.equal(true);
    expect(verifyAnchorSignature(decoded, randomBytes(32))).to.equal(false);
  });

  it('fails verification when any signed byte is altered, and refuses foreign payloads', () => {
    const bytes = encodeSignedAnchor(fields, seed, genesis);
    for (const offset of [5, 8, 16, 20, 51, 60]) {
      const altered = Buffer.from(bytes);
      altered[offset] = altered[offset]! ^ 0xff;
      expect(verifyAnchorSignature(decodeAnchor(altered), genesis), `offset ${offset}`).to.equal(false);
    }
    expect(() => decodeAnchor(bytes.subarray(0, 147))).to.throw(/not a works-api anchor/);
    expect(() => decodeAnchor(Buffer.concat([Buffer.from('XXXX'), bytes.subarray(4)]))).to.throw(/not a works-api anchor/);
  });
});
