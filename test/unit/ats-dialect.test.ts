import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import type { ApiPromise } from '@polkadot/api';
import { hexToU8a } from '@polkadot/util';
import { cryptoWaitReady, sr25519PairFromSeed, sr25519Verify } from '@polkadot/util-crypto';
import {
  atsDialect,
  buildAtsCall,
  decodeAtsEvent,
  encodeCreateOnBehalfPayload,
  encodeUpdateOnBehalfPayload,
  signOnBehalfPayload,
  CREATE_PAYLOAD_LENGTH,
  UPDATE_PAYLOAD_LENGTH,
} from '../../shared/chain/dialects/ats';
import type { AnchorRequest } from '../../shared/chain/dialect';
import { chooseDialect } from '../../shared/chain/choose-dialect';
import { remarkDialect } from '../../shared/chain/dialects/remark';
import { AnchorService } from '../../shared/chain/anchors';
import type { ChainConnections } from '../../shared/chain/connections';
import { checkAtsVersion, versionIsValid } from '../../shared/chain/verify';

// Alice's well-known dev key, as hex and as ss58 (prefix 42)
const ALICE_HEX = 'd43593c715fdd31c61141abd04a99fd6822c8558854ccde39a5684e7a56da27d';
const ALICE_SS58 = '5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY';
const COMMITMENT = Buffer.from(Array.from({ length: 32 }, (_, i) => i)); // 00 01 … 1f
const COMMITMENT_HEX = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
const NONCE = 0x0102030405060708n; // u64 LE: 08 07 06 05 04 03 02 01

describe('ats dialect', () => {
  before(() => cryptoWaitReady());

  describe('on-behalf payloads', () => {
    const create = { commitment: COMMITMENT, protocolVersion: 1, operator: ALICE_SS58, nonce: NONCE };
    const update = { ...create, atsId: 258n };

    it('encodes CreateOnBehalfPayload as action ‖ commitment ‖ protocol_version ‖ operator ‖ nonce', () => {
      const expected = '00' + COMMITMENT_HEX + '01' + ALICE_HEX + '0807060504030201';
      const bytes = encodeCreateOnBehalfPayload(create);
      expect(bytes.toString('hex')).to.equal(expected);
      expect(bytes).to.have.length(CREATE_PAYLOAD_LENGTH).and.to.have.length(74);
      // the operator may be given as bytes as well as ss58
      expect(encodeCreateOnBehalfPayload({ ...create, operator: hexToU8a(`0x${ALICE_HEX}`) }).toString('hex')).to.equal(expected);
    });

    it('encodes UpdateOnBehalfPayload as action ‖ ats_id ‖ commitment ‖ protocol_version ‖ operator ‖ nonce', () => {
      const expected = '01' + '0201000000000000' + COMMITMENT_HEX + '01' + ALICE_HEX + '0807060504030201';
      const bytes = encodeUpdateOnBehalfPayload(update);
      expect(bytes.toString('hex')).to.equal(expected);
      expect(bytes).to.have.length(UPDATE_PAYLOAD_LENGTH).and.to.have.length(82);
      expect(encodeUpdateOnBehalfPayload({ ...update, atsId: 0n, nonce: 0n, protocolVersion: 2 }).toString('hex')).to.equal(
        '01' + '0000000000000000' + COMMITMENT_HEX + '02' + ALICE_HEX + '0000000000000000',
      );
    });

    it('refuses fields the pallet would not accept', () => {
      expect(() => encodeCreateOnBehalfPayload({ ...create, commitment: Buffer.alloc(31) })).to.throw(RangeError);
      expect(() => encodeCreateOnBehalfPayload({ ...create, protocolVersion: 0 })).to.throw(RangeError);
      expect(() => encodeCreateOnBehalfPayload({ ...create, protocolVersion: 256 })).to.throw(RangeError);
      expect(() => encodeCreateOnBehalfPayload({ ...create, nonce: 1n << 64n })).to.throw(RangeError);
      expect(() => encodeUpdateOnBehalfPayload({ ...update, atsId: -1n })).to.throw(RangeError);
      expect(() => encodeCreateOnBehalfPayload({ ...create, operator: new Uint8Array(20) })).to.throw(RangeError);
    });

    it('the owner signature verifies over exactly the payload bytes and fails for any altered byte', () => {
      const seed = randomBytes(32);
      for (const payload of [encodeCreateOnBehalfPayload(create), encodeUpdateOnBehalfPayload(update)]) {
        const { owner, signature } = signOnBehalfPayload(payload, seed);
        expect(owner.equals(Buffer.from(sr25519PairFromSeed(seed).publicKey))).to.equal(true);
        expect(signature).to.have.length(64);
        expect(sr25519Verify(payload, signature, owner)).to.equal(true);
        for (const offset of [0, 1, 20, 33, 40, payload.length - 1]) {
          const altered = Buffer.from(payload);
          altered[offset] = altered[offset]! ^ 0x01;
          expect(sr25519Verify(altered, signature, owner), `offset ${offset}`).to.equal(false);
        }
        expect(sr25519Verify(payload, signature, sr25519PairFromSeed(randomBytes(32)).publicKey)).to.equal(false);
      }
      // a create authorization is not an update authorization
      const createSig = signOnBehalfPayload(encodeCreateOnBehalfPayload(create), seed);
      expect(sr25519Verify(encodeUpdateOnBehalfPayload(update), createSig.signature, createSig.owner)).to.equal(false);
    });
  });

  describe('events', () => {
    const owner = ALICE_SS58;
    const commitment = `0x${COMMITMENT_HEX}`;

    it('AtsCreated, named and positional: the chain id, API version 1', () => {
      const named = { atsId: 0, owner, commitment, protocolVersion: 1, operator: owner };
      expect(decodeAtsEvent({ section: 'ats', method: 'AtsCreated', data: named })).to.deep.equal({ atsId: 0n, version: 1 });
      expect(decodeAtsEvent({ section: 'ats', method: 'AtsCreated', data: [41, owner, commitment, 1, null] })).to.deep.equal({
        atsId: 41n,
        version: 1,
      });
    });

    it('AtsUpdated, named and positional: API version = chain version + 1', () => {
      const named = { atsId: 7, version: 2, commitment, protocolVersion: 1, operator: owner };
      expect(decodeAtsEvent({ section: 'ats', method: 'AtsUpdated', data: named })).to.deep.equal({ atsId: 7n, version: 3 });
      expect(decodeAtsEvent({ section: 'ats', method: 'AtsUpdated', data: [7, 1, commitment, 1, null] })).to.deep.equal({
        atsId: 7n,
        version: 2,
      });
    });

    it('reads a u64 ats_id above 2^53 from its hex JSON form', () => {
      const data = ['0x0020000000000001', owner, commitment, 1, null];
      expect(decodeAtsEvent({ section: 'ats', method: 'AtsCreated', data })).to.deep.equal({ atsId: 9007199254740993n, version: 1 });
    });

    it('refuses an ATS event whose ids cannot be read', () => {
      expect(() => decodeAtsEvent({ section: 'ats', method: 'AtsCreated', data: { owner } })).to.throw(/ats_id/);
      expect(() => decodeAtsEvent({ section: 'ats', method: 'AtsUpdated', data: [7] })).to.throw(/version/);
    });

    it('readAssignment ignores unrelated events and takes the ATS one', () => {
      const unrelated = [
        { section: 'balances', method: 'Withdraw', data: [owner, 1000] },
        { section: 'balances', method: 'Held', data: { reason: 'AtsDeposit', who: owner, amount: 5 } },
        { section: 'ats', method: 'AtsRevoked', data: { atsId: 3, owner, operator: null } },
        { section: 'other', method: 'AtsCreated', data: { atsId: 9 } },
        { section: 'system', method: 'ExtrinsicSuccess', data: [{ weight: 1 }] },
      ];
      expect(atsDialect.readAssignment(unrelated)).to.deep.equal({});
      expect(atsDialect.readAssignment([])).to.deep.equal({});
      const created = { section: 'ats', method: 'AtsCreated', data: { atsId: 12, owner, commitment, protocolVersion: 1, operator: owner } };
      expect(atsDialect.readAssignment([...unrelated.slice(0, 2), created, ...unrelated.slice(2)])).to.deep.equal({
        atsId: 12n,
        version: 1,
      });
    });
  });

  describe('buildCall and chooseDialect', () => {
    const seed = randomBytes(32);
    const request: AnchorRequest = {
      action: 'update',
      network: 'testnet',
      protocolVersion: 1,
      atsId: 5n,
      version: 2,
      commitment: COMMITMENT,
      ownerSeed: seed,
    };

    /** What the fake API's extrinsic builders return: a call reading back as `hex`. */
    const encoded = (hex: string) => ({ method: { toHex: () => hex } });

    function fakeApi(nonce: number) {
      const calls: { method: string; args: unknown[]; nonceOwner?: Uint8Array }[] = [];
      const api = {
        query: {
          ats: {
            onBehalfNonce: async (who: Uint8Array) => {
              calls.push({ method: 'onBehalfNonce', args: [], nonceOwner: who });
              return { toString: () => String(nonce) };
            },
          },
        },
        tx: {
          ats: {
            createOnBehalf: (...args: unknown[]) => (calls.push({ method: 'createOnBehalf', args }), encoded('create-call')),
            updateOnBehalf: (...args: unknown[]) => (calls.push({ method: 'updateOnBehalf', args }), encoded('update-call')),
          },
        },
      };
      return { api: api as unknown as ApiPromise, calls };
    }

    it('reads the owner nonce from the pallet, signs the payload, and builds updateOnBehalf', async () => {
      const { api, calls } = fakeApi(4);
      const call = await buildAtsCall(api, request, ALICE_SS58);
      expect(call.method.toHex()).to.equal('update-call');
      const owner = Buffer.from(sr25519PairFromSeed(seed).publicKey);
      expect(Buffer.from(calls[0]!.nonceOwner!).equals(owner)).to.equal(true);
      const [who, atsId, commitment, protocolVersion, nonce, signature] = calls[1]!.args as [
        Buffer,
        bigint,
        Buffer,
        number,
        bigint,
        { Sr25519: string },
      ];
      expect([calls[1]!.method, atsId, protocolVersion, nonce]).to.deep.equal(['updateOnBehalf', 5n, 1, 4n]);
      expect(who.equals(owner) && commitment.equals(COMMITMENT)).to.equal(true);
      const payload = encodeUpdateOnBehalfPayload({
        atsId: 5n,
        commitment: COMMITMENT,
        protocolVersion: 1,
        operator: ALICE_SS58,
        nonce: 4n,
      });
      expect(sr25519Verify(payload, signature.Sr25519, owner)).to.equal(true);
    });

    it('builds createOnBehalf for a registration through the dialect, naming the relayer as operator', async () => {
      const { api, calls } = fakeApi(0);
      const register = { ...request, action: 'register' as const, atsId: 0n, version: 1 };
      expect(await atsDialect.buildCall(api, register, ALICE_SS58)).to.equal('create-call');
      const [, commitment, protocolVersion, nonce, signature] = calls[1]!.args as [Buffer, Buffer, number, bigint, { Sr25519: string }];
      expect([calls[1]!.method, protocolVersion, nonce]).to.deep.equal(['createOnBehalf', 1, 0n]);
      const payload = encodeCreateOnBehalfPayload({ commitment, protocolVersion: 1, operator: ALICE_SS58, nonce: 0n });
      expect(sr25519Verify(payload, signature.Sr25519, sr25519PairFromSeed(seed).publicKey)).to.equal(true);
      // signed for another operator, the payload does not verify
      const other = encodeCreateOnBehalfPayload({ commitment, protocolVersion: 1, operator: new Uint8Array(32), nonce: 0n });
      expect(sr25519Verify(other, signature.Sr25519, sr25519PairFromSeed(seed).publicKey)).to.equal(false);
    });

    it('quotes a call ahead signed by the owner over the placeholder commitment, the seed lent for it alone', async () => {
      const { api, calls } = fakeApi(3);
      const chain = Object.assign(api, { registry: { chainDecimals: [12] }, consts: {} });
      const chains = { networks: [{ network: 'testnet', relayerSeed: '//Alice' }], api: async () => chain };
      const anchors = new AnchorService(chains as unknown as ChainConnections);
      const judged: string[] = [];
      Object.assign(anchors, { judgeCall: async (_: string, hex: string) => (judged.push(hex), { feePlanck: 5n, dryRun: { ok: true } }) });
      const lent: Buffer[] = [];
      const lend = <T>(use: (s: Buffer) => Promise<T>) => (lent.push(seed), use(seed));
      const ahead = { action: 'register' as const, network: 'testnet' as const, protocolVersion: 1, atsId: 0n, version: 1 };
      const quoted = await anchors.quoteAhead('testnet', ahead, lend);
      expect([judged, quoted.feePlanck, quoted.dryRun, lent.length]).to.deep.equal([['create-call'], 5n, { ok: true }, 1]);
      const [owner, commitment] = calls.at(-1)!.args as [Buffer, Buffer];
      expect(commitment.equals(Buffer.alloc(32)) && owner.equals(sr25519PairFromSeed(seed).publicKey)).to.equal(true);
      expect(atsDialect.quoteCall).to.equal(undefined);
    });

    it('chooseDialect picks ats when the runtime has ats.createOnBehalf, remark otherwise', () => {
      const withAts = { tx: { ats: { createOnBehalf: () => undefined }, system: { remarkWithEvent: () => undefined } } };
      const withoutAts = { tx: { system: { remarkWithEvent: () => undefined } } };
      const atsWithoutCall = { tx: { ats: { create: () => undefined }, system: { remarkWithEvent: () => undefined } } };
      expect(chooseDialect(withAts as unknown as ApiPromise)).to.equal(atsDialect);
      expect(chooseDialect(withAts as unknown as ApiPromise).name).to.equal('ats');
      expect(chooseDialect(withoutAts as unknown as ApiPromise)).to.equal(remarkDialect);
      expect(chooseDialect(atsWithoutCall as unknown as ApiPromise).name).to.equal('remark');
    });
  });
});

describe('verify, ats dialect (from the events of the version’s block)', () => {
  const owner = `0x${ALICE_HEX}`;
  const commitment = `0x${COMMITMENT_HEX}`;
  const v = (version: number) => ({ version, commitment, blockHash: '0xb1', txHash: '0xt1' });
  const created = {
    section: 'ats',
    method: 'AtsCreated',
    data: { atsId: 7, owner: ALICE_SS58, commitment, protocolVersion: 1, operator: null },
  };
  const updated = { section: 'ats', method: 'AtsUpdated', data: { atsId: 7, version: 1, commitment, protocolVersion: 1, operator: null } };

  it('accepts the creation and an update that name the ats_id, version and commitment, the creation by the owner', () => {
    const first = checkAtsVersion(
      [{ section: 'system', method: 'ExtrinsicSuccess', data: {} }, created],
      { atsId: 7, ownerPublicKey: owner },
      v(1),
    );
    expect(versionIsValid(first)).to.equal(true);
    expect(versionIsValid(checkAtsVersion([updated], { atsId: 7, ownerPublicKey: owner }, v(2)))).to.equal(true);
  });

  it('refuses another owner, another commitment, another ats_id or version, and a block not on the chain', () => {
    const other = `0x${'11'.repeat(32)}`;
    expect(checkAtsVersion([created], { atsId: 7, ownerPublicKey: other }, v(1))).to.include({ found: true, owner: false });
    expect(checkAtsVersion([created], { atsId: 7, ownerPublicKey: owner }, { ...v(1), commitment: `0x${'ee'.repeat(32)}` })).to.include({
      found: true,
      commitment: false,
    });
    expect(checkAtsVersion([created], { atsId: 8, ownerPublicKey: owner }, v(1))).to.include({ found: false });
    expect(checkAtsVersion([updated], { atsId: 7, ownerPublicKey: owner }, v(3))).to.include({ found: false });
    expect(checkAtsVersion(undefined, { atsId: 7, ownerPublicKey: owner }, v(1)).problem).to.match(/not on this chain/);
  });
});
