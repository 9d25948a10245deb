import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { cryptoWaitReady, encodeAddress, sr25519PairFromSeed, sr25519Sign, sr25519Verify } from '@polkadot/util-crypto';
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
    let expected: AnchorExpectation & { readonly atsId: number; readonly owner: string };
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

      const wallet = await stack.app.context.db('wallets').where({ organization_id: org, network: 'testnet' }).first();
      ownerKey = wallet.public_key;
      // the organization's wallet key is the owner the verifier expects
      const [title, creators] = [body.title as string, body.creators as Creator[]];
      expected = { owner: ownerKey, audio: registered.audio, title, creators, atsId, verifySignature: sr25519Verify };
    });
    after(() => api?.disconnect());

    it('accepts it with the registration’s audio and metadata, the chain’s genesis and an sr25519 verifier', async () => {
      const verified = await verifyAnchor(remark, genesis, { ...expected, version: 1, network: 'testnet' });
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
      expect(verified.warning).to.equal(undefined);
      // hex input alike, and the owner as its ss58 address (the work's `owner` in the API)
      const bySs58 = await verifyAnchor(hex(remark), Buffer.from(genesis.slice(2), 'hex'), {
        ...expected,
        owner: encodeAddress(ownerKey, 42),
      });
      expect(bySs58).to.deep.include({ owner: ownerKey, signatureChecked: true });
      // the signature skipped on request only, and the result says so
      const unchecked = await verifyAnchor(remark, genesis, { ...expected, verifySignature: undefined, unsafeSkipSignature: true });
      expect(unchecked).to.deep.include({ signatureChecked: false, commitment: quoted });
      expect(unchecked.warning).to.match(/^UNSAFE: .*Neither the owner nor the chain is proven/);
    });

    it('rejects the same commitment anchored under another key: owner_mismatch, though that key’s signature holds', async () => {
      // an attacker copies the victim's public commitment, ats_id and version into an anchor of their own
      const decoded = decodeRemarkAnchor(remark);
      const attackerSeed = randomBytes(32);
      const forged = encodeAnchor(
        { action: 0, network: 0, atsId: decoded.atsId, version: 1, commitment: Buffer.from(decoded.commitment.slice(2), 'hex') },
        attackerSeed,
        Buffer.from(genesis.slice(2), 'hex'),
      );
      expect(await reasonOf(verifyAnchor(forged.bytes, genesis, expected))).to.equal('owner_mismatch');
      expect(await reasonOf(verifyAnchor(forged.bytes, genesis, { ...expected, unsafeSkipSignature: true }))).to.equal('owner_mismatch');
      // everything else of it holds: only the owner tells it apart
      const asAttacker = await verifyAnchor(forged.bytes, genesis, { ...expected, owner: hex(forged.publicKey) });
      expect(asAttacker).to.deep.include({ signatureChecked: true, commitment: quoted });
      // and the victim's own anchor is not the attacker's
      expect(await reasonOf(verifyAnchor(remark, genesis, { ...expected, owner: hex(forged.publicKey) }))).to.equal('owner_mismatch');
    });

    it('refuses to run without a verifier unless the skip is explicit; checks the network; refuses an owner that is no key', async () => {
      const { verifySignature: _verifier, ...noVerifier } = expected;
      const attempts = [noVerifier, { ...noVerifier, unsafeSkipSignature: false }, { ...noVerifier, verifySignature: 'yes' }];
      for (const options of attempts) {
        let thrown: unknown;
        try {
          await verifyAnchor(remark, genesis, options as unknown as AnchorExpectation);
        } catch (err) {
          thrown = err;
        }
        expect(thrown).to.be.instanceOf(TypeError);
        expect((thrown as Error).message).to.match(/verifySignature.*unsafeSkipSignature/);
      }
      expect(await reasonOf(verifyAnchor(remark, genesis, { ...expected, network: 'mainnet' }))).to.equal('network_mismatch');
      const address = encodeAddress(ownerKey, 42);
      const corrupted = address.slice(0, 10) + (address[10] === 'a' ? 'b' : 'a') + address.slice(11);
      for (const owner of ['', ownerKey.slice(0, 64), `${ownerKey}00`, corrupted, 'not an address', encodeAddress(randomBytes(33))]) {
        expect(await reasonOf(verifyAnchor(remark, genesis, { ...expected, owner })), owner).to.equal('invalid_owner');
      }
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
      const options = expected;
      expect(await reasonOf(verifyAnchor(remark, randomBytes(32), options))).to.equal('signature_invalid');
      const otherOwner = Buffer.from(remark);
      otherOwner[60]! ^= 1;
      // another owner key written in: not the expected owner, and were it expected, not its signature
      expect(await reasonOf(verifyAnchor(otherOwner, genesis, options))).to.equal('owner_mismatch');
      expect(await reasonOf(verifyAnchor(otherOwner, genesis, { ...options, owner: hex(otherOwner.subarray(52, 84)) }))).to.equal(
        'signature_invalid',
      );
      const otherSignature = Buffer.from(remark);
      otherSignature[100]! ^= 1;
      expect(await reasonOf(verifyAnchor(otherSignature, genesis, options))).to.equal('signature_invalid');
      // an ats_id changed after signing: only the signature can tell
      const otherAtsId = Buffer.from(remark);
      otherAtsId.writeBigUInt64LE(BigInt(expected.atsId + 1), 8);
      const { atsId: _atsId, ...anyAtsId } = options;
      expect(await reasonOf(verifyAnchor(otherAtsId, genesis, anyAtsId))).to.equal('signature_invalid');
      expect(await reasonOf(verifyAnchor(otherAtsId, genesis, options))).to.equal('ats_id_mismatch');
    });

    it('rejects another ats_id or version, a malformed payload and a genesis hash that is not 32 bytes', async () => {
      expect(await reasonOf(verifyAnchor(remark, genesis, { ...expected, version: 2 }))).to.equal('version_mismatch');
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
          fc.oneof(
            fc.record({ action: fc.constant<0>(0), version: fc.constant(1) }),
            fc.record({ action: fc.constant<1>(1), version: fc.integer({ min: 2, max: 0xffffffff }) }),
          ),
          fc.record({ network: fc.constantFrom<0 | 1>(0, 1), atsId: fc.maxSafeNat(), ss58Prefix: fc.integer({ min: 0, max: 16383 }) }),
          fc.uint8Array({ minLength: 1, maxLength: 256 }),
          fc.uint8Array({ minLength: 32, maxLength: 32 }),
          fc.uint8Array({ minLength: 32, maxLength: 32 }),
          async (actionVersion, { ss58Prefix, ...rest }, audio, seed, genesisBytes) => {
            const fields = { ...actionVersion, ...rest };
            const genesis = Buffer.from(genesisBytes);
            const { commitment } = await computeCommitment(audio, 'A title', creators);
            const { bytes, publicKey } = encodeAnchor({ ...fields, commitment: Buffer.from(commitment.slice(2), 'hex') }, seed, genesis);
            // the owner as hex, or as its ss58 address under any prefix (1- and 2-byte)
            const options = {
              owner: encodeAddress(publicKey, ss58Prefix),
              audio,
              title: 'A title',
              creators,
              verifySignature: sr25519Verify,
            };
            const verified = await verifyAnchor(bytes, genesis, options);
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
            expect(await reasonOf(verifyAnchor(bytes, elsewhere, { ...options, owner: hex(publicKey) }))).to.equal('signature_invalid');
          },
        ),
        { numRuns: 50 },
      );
    });

    it('refuses an action that disagrees with its version: a registration is 1, a new version 2 or more', async () => {
      const audio = Buffer.of(1);
      const creators: Creator[] = [{ full_name: 'Ada', roles: { author: true } }];
      const { commitment } = await computeCommitment(audio, 't', creators);
      const genesis = randomBytes(32);
      const seed = randomBytes(32);
      const owner = hex(sr25519PairFromSeed(seed).publicKey);
      const anchor = (action: 0 | 1, version: number) =>
        encodeAnchor({ action, network: 1, atsId: 9, version, commitment: Buffer.from(commitment.slice(2), 'hex') }, seed, genesis).bytes;
      const options = { owner, audio, title: 't', creators, verifySignature: sr25519Verify };
      for (const [action, version] of [
        [0, 7],
        [0, 2],
        [0, 0],
        [1, 1],
        [1, 0],
      ] as const) {
        expect(await reasonOf(verifyAnchor(anchor(action, version), genesis, options)), `${action}/${version}`).to.equal(
          'malformed_payload',
        );
        expect(() => decodeRemarkAnchor(anchor(action, version))).to.throw(AnchorVerificationError, /cannot be version/);
      }
      // the consistent ones, signed alike, pass
      expect((await verifyAnchor(anchor(0, 1), genesis, options)).action).to.equal('register');
      expect((await verifyAnchor(anchor(1, 2), genesis, options)).action).to.equal('update');
    });

    it('reports a verifier that throws (bytes that are no key or signature at all) as signature_invalid', async () => {
      const audio = Buffer.of(1);
      const creators: Creator[] = [{ full_name: 'Ada', roles: { author: true } }];
      const { commitment } = await computeCommitment(audio, 't', creators);
      const { bytes, publicKey } = encodeAnchor(
        { action: 0, network: 0, atsId: 1, version: 1, commitment: Buffer.from(commitment.slice(2), 'hex') },
        randomBytes(32),
        randomBytes(32),
      );
      const throwing = () => {
        throw new Error('not a point');
      };
      const options = { owner: hex(publicKey), audio, title: 't', creators, verifySignature: throwing };
      expect(await reasonOf(verifyAnchor(bytes, randomBytes(32), options))).to.equal('signature_invalid');
    });
  });
});
