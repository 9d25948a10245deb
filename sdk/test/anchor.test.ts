import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { cryptoWaitReady, sr25519PairFromSeed, sr25519Sign, sr25519Verify } from '@polkadot/util-crypto';
import { AnchorVerificationError, decodeRemarkAnchor, verifyAnchor, type AnchorExpectation } from '../src/anchor';
import { computeCommitment, type Creator } from '../src/commitment';
import { useStack } from '../../test/helpers/workers';
import { call } from '../../test/helpers/app';
import { createKey, createOrg } from '../../test/helpers/factories';
import { initBody, register, settled } from '../../test/helpers/registration';

/** What is read of a decoded call (an extrinsic's `method`, or a call inside a batch). */
interface CallLike {
  readonly section: string;
  readonly method: string;
  readonly args: readonly { toU8a(bare?: boolean): Uint8Array }[];
}

/** The remarks among an extrinsic's calls, batches opened (the relayer sends a utility batch). */
function remarksOf(method: CallLike): Uint8Array[] {
  if (method.section === 'system' && (method.method === 'remarkWithEvent' || method.method === 'remark'))
    return [method.args[0]!.toU8a(true)];
  if (method.section === 'utility') return (method.args[0] as unknown as CallLike[]).flatMap(remarksOf);
  return [];
}

/** The reason `promise` rejected with an AnchorVerificationError. */
async function reasonOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof AnchorVerificationError) return err.reason;
    throw err;
  }
  throw new Error('expected an AnchorVerificationError, it resolved');
}

/** A layout-1 payload encoded here from docs/remark-anchor.md's table, signed with `seed` for `genesis`. */
function encodeAnchor(
  fields: { action: 0 | 1; network: 0 | 1; atsId: number; version: number; commitment: Buffer },
  seed: Uint8Array,
  genesis: Buffer,
) {
  const pair = sr25519PairFromSeed(seed);
  const prefix = Buffer.alloc(84);
  prefix.write('WRKS', 0, 'latin1');
  prefix.writeUInt8(1, 4);
  prefix.writeUInt8(fields.action, 5);
  prefix.writeUInt8(fields.network, 6);
  prefix.writeUInt8(1, 7);
  prefix.writeBigUInt64LE(BigInt(fields.atsId), 8);
  prefix.writeUInt32LE(fields.version, 16);
  fields.commitment.copy(prefix, 20);
  Buffer.from(pair.publicKey).copy(prefix, 52);
  return { bytes: Buffer.concat([prefix, sr25519Sign(Buffer.concat([prefix, genesis]), pair)]), publicKey: Buffer.from(pair.publicKey) };
}

const hex = (b: Uint8Array) => `0x${Buffer.from(b).toString('hex')}`;

describe('sdk: verifyAnchor (remark dialect, layout 1)', function () {
  this.timeout(180_000);
  before(() => cryptoWaitReady());

  describe('a real registration, read back from the local chain', () => {
    const stack = useStack({ env: { REDIS_PREFIX: `sdk_anchor_${Date.now()}` } });
    let api: ApiPromise;
    let remark: Uint8Array;
    let genesis: string;
    let expected: AnchorExpectation & { readonly atsId: number };
    let quoted: string;
    let ownerKey: string;

    before(async () => {
      api = await ApiPromise.create({ provider: new WsProvider(stack.config.chains[0]!.wsUrl), noInitWarn: true });
      genesis = api.genesisHash.toHex();
      const org = await createOrg(stack.app.context, 1000);
      const key = await createKey(stack.app.context, org, ['works:register', 'works:read']);
      const body = initBody({ title: '  Nocturne — 𝄞 e\u0301té  ' });
      const registered = await register(stack.app.url, key.token, body);
      expect(registered.confirm.status).to.equal(202);
      quoted = registered.prepare.body.commitment;
      const txId = registered.confirm.body.transaction_id;
      await settled(stack.app.context, txId);
      const tx = await call(stack.app.url, 'GET', `/v1/transactions/${txId}`, { token: key.token });
      expect(tx.body.status).to.equal('finalized');
      const { block_hash: blockHash, tx_hash: txHash, ats_id: atsId } = tx.body.result;

      // the transaction's extrinsic in its block; among its remarks, the one naming this ats_id
      const block = await api.rpc.chain.getBlock(blockHash);
      const extrinsic = block.block.extrinsics.find((x) => x.hash.toHex() === txHash);
      expect(extrinsic, 'the extrinsic in the block the result names').to.not.equal(undefined);
      const remarks = remarksOf(extrinsic!.method as unknown as CallLike);
      remark = remarks.find((r) => decodeRemarkAnchor(r).atsId === atsId)!;
      expect(remark, `a remark naming ats_id ${atsId}`).to.not.equal(undefined);

      expected = { audio: registered.audio, title: body.title as string, creators: body.creators as Creator[], atsId };
      const wallet = await stack.app.context.db('wallets').where({ organization_id: org, network: 'testnet' }).first();
      ownerKey = wallet.public_key;
    });
    after(() => api?.disconnect());

    it('accepts it with the registration’s audio and metadata, the chain’s genesis and an sr25519 verifier', async () => {
      const verified = await verifyAnchor(remark, genesis, { ...expected, version: 1, verifySignature: sr25519Verify });
      expect(verified).to.deep.include({
        action: 'register',
        network: 'testnet',
        protocolVersion: 1,
        atsId: expected.atsId,
        version: 1,
        commitment: quoted,
        owner: ownerKey,
        signatureChecked: true,
      });
      expect(verified.commitment).to.equal((await computeCommitment(expected.audio, expected.title, expected.creators)).commitment);
      expect(hex(verified.signedMessage)).to.equal(hex(remark.subarray(0, 84)) + genesis.slice(2));
      // hex input alike; without a verifier the signature, and so the chain, is reported unchecked
      const unchecked = await verifyAnchor(hex(remark), Buffer.from(genesis.slice(2), 'hex'), expected);
      expect(unchecked.signatureChecked).to.equal(false);
      expect(unchecked.commitment).to.equal(quoted);
    });

    it('rejects another audio or another title: commitment_mismatch', async () => {
      const otherAudio = Buffer.from(expected.audio as Buffer);
      otherAudio[0]! ^= 1;
      expect(await reasonOf(verifyAnchor(remark, genesis, { ...expected, audio: otherAudio }))).to.equal('commitment_mismatch');
      expect(await reasonOf(verifyAnchor(remark, genesis, { ...expected, title: 'Nocturne' }))).to.equal('commitment_mismatch');
      // the title is trimmed, as the service trims it: padding is no difference
      expect((await verifyAnchor(remark, genesis, { ...expected, title: `\n${expected.title}\u3000` })).commitment).to.equal(quoted);
      const [first, ...others] = expected.creators;
      const renamed = [{ ...first!, full_name: `${first!.full_name} ` }, ...others];
      expect(await reasonOf(verifyAnchor(remark, genesis, { ...expected, creators: renamed }))).to.equal('commitment_mismatch');
    });

    it('rejects another chain’s genesis hash, and a payload changed after signing: signature_invalid', async () => {
      const options = { ...expected, verifySignature: sr25519Verify };
      expect(await reasonOf(verifyAnchor(remark, randomBytes(32), options))).to.equal('signature_invalid');
      const otherOwner = Buffer.from(remark);
      otherOwner[60]! ^= 1;
      expect(await reasonOf(verifyAnchor(otherOwner, genesis, options))).to.equal('signature_invalid');
      const otherSignature = Buffer.from(remark);
      otherSignature[100]! ^= 1;
      expect(await reasonOf(verifyAnchor(otherSignature, genesis, options))).to.equal('signature_invalid');
      // a version number changed after signing: only the signature can tell
      const otherVersion = Buffer.from(remark);
      otherVersion.writeUInt32LE(2, 16);
      expect(await reasonOf(verifyAnchor(otherVersion, genesis, options))).to.equal('signature_invalid');
      expect(await reasonOf(verifyAnchor(otherVersion, genesis, { ...options, version: 1 }))).to.equal('version_mismatch');
    });

    it('rejects another ats_id, a malformed payload and a genesis hash that is not 32 bytes', async () => {
      expect(await reasonOf(verifyAnchor(remark, genesis, { ...expected, atsId: expected.atsId + 1 }))).to.equal('ats_id_mismatch');
      expect(await reasonOf(verifyAnchor(remark.subarray(0, 147), genesis, expected))).to.equal('malformed_payload');
      const notOurs = Buffer.from(remark);
      notOurs.write('XRKS', 0, 'latin1');
      expect(await reasonOf(verifyAnchor(notOurs, genesis, expected))).to.equal('malformed_payload');
      const laterLayout = Buffer.from(remark);
      laterLayout[4] = 2;
      expect(await reasonOf(verifyAnchor(laterLayout, genesis, expected))).to.equal('malformed_payload');
      const laterProtocol = Buffer.from(remark);
      laterProtocol[7] = 2;
      expect(await reasonOf(verifyAnchor(laterProtocol, genesis, expected))).to.equal('unsupported_protocol');
      expect(await reasonOf(verifyAnchor(remark, genesis.slice(0, 64), expected))).to.equal('invalid_genesis_hash');
      expect(await reasonOf(verifyAnchor(remark, 'genesis', expected))).to.equal('invalid_genesis_hash');
    });
  });

  describe('payloads encoded here from the documented table', () => {
    it('decodes every field of any anchor, and verifies the signed ones for their own genesis only', async () => {
      const creators: Creator[] = [{ full_name: 'Ada', roles: { composer: true } }];
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            action: fc.constantFrom<0 | 1>(0, 1),
            network: fc.constantFrom<0 | 1>(0, 1),
            atsId: fc.maxSafeNat(),
            version: fc.integer({ min: 1, max: 0xffffffff }),
          }),
          fc.uint8Array({ minLength: 1, maxLength: 256 }),
          fc.uint8Array({ minLength: 32, maxLength: 32 }),
          fc.uint8Array({ minLength: 32, maxLength: 32 }),
          async (fields, audio, seed, genesisBytes) => {
            const genesis = Buffer.from(genesisBytes);
            const { commitment } = await computeCommitment(audio, 'A title', creators);
            const { bytes, publicKey } = encodeAnchor({ ...fields, commitment: Buffer.from(commitment.slice(2), 'hex') }, seed, genesis);
            const verified = await verifyAnchor(bytes, genesis, { audio, title: 'A title', creators, verifySignature: sr25519Verify });
            expect(verified).to.deep.include({
              action: fields.action === 0 ? 'register' : 'update',
              network: fields.network === 0 ? 'testnet' : 'mainnet',
              atsId: fields.atsId,
              version: fields.version,
              commitment,
              owner: hex(publicKey),
              signatureChecked: true,
            });
            const elsewhere = Buffer.from(genesis);
            elsewhere[0]! ^= 0x80;
            const options = { audio, title: 'A title', creators, verifySignature: sr25519Verify };
            expect(await reasonOf(verifyAnchor(bytes, elsewhere, options))).to.equal('signature_invalid');
          },
        ),
        { numRuns: 50 },
      );
    });

    it('reports a verifier that throws (bytes that are no key or signature at all) as signature_invalid', async () => {
      const audio = Buffer.of(1);
      const creators: Creator[] = [{ full_name: 'Ada', roles: { author: true } }];
      const { commitment } = await computeCommitment(audio, 't', creators);
      const { bytes } = encodeAnchor(
        { action: 0, network: 0, atsId: 1, version: 1, commitment: Buffer.from(commitment.slice(2), 'hex') },
        randomBytes(32),
        randomBytes(32),
      );
      const throwing = () => {
        throw new Error('not a point');
      };
      expect(await reasonOf(verifyAnchor(bytes, randomBytes(32), { audio, title: 't', creators, verifySignature: throwing }))).to.equal(
        'signature_invalid',
      );
    });
  });
});
