import { expect } from 'chai';
import { startApp, type TestApp } from '../helpers/app';
import { createOrg } from '../helpers/factories';
import { walletSeedAad } from '../../shared/organizations/service';
import { findWallet, insertOrganization } from '../../shared/organizations/repo';
import { sr25519PairFromSeed, encodeAddress, cryptoWaitReady } from '@polkadot/util-crypto';

describe('organizations and wallets', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  it('keeps one sr25519 wallet per network whose seed is unreadable without SECRETS_KEY', async () => {
    await cryptoWaitReady();
    const org = await createOrg(app.context, 5);
    const wallets = await app.context.db('wallets').where({ organization_id: org }).orderBy('network');
    expect(wallets.map((w) => w.network)).to.deep.equal(['mainnet', 'testnet']);
    const table = JSON.stringify(await app.context.db('wallets').select('*'));
    for (const wallet of wallets) {
      const seed = app.context.box.open(wallet.seed_encrypted, walletSeedAad(org, wallet.network));
      expect(seed).to.have.length(32);
      // the stored ciphertext does not contain the seed in any common encoding
      for (const encoding of ['hex', 'base64', 'base64url'] as const) expect(table).to.not.include(seed.toString(encoding));
      const pair = sr25519PairFromSeed(seed);
      expect(encodeAddress(pair.publicKey, 42)).to.equal(wallet.address);
      // bound to its row: the seed of one network does not open as the other's
      const other = wallet.network === 'testnet' ? 'mainnet' : 'testnet';
      expect(() => app.context.box.open(wallet.seed_encrypted, walletSeedAad(org, other))).to.throw();
    }
  });

  it('finds a wallet as stored, and one created after a miss (a missing wallet is asked for again, not remembered)', async () => {
    const org = (await insertOrganization(app.context.db, 'walletless for now')).id;
    expect(await findWallet(app.context.db, org, 'testnet')).to.equal(undefined);
    const sealed = app.context.box.seal(Buffer.alloc(32, 7), walletSeedAad(org, 'testnet'));
    const row = {
      address: '5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY',
      public_key: '0x' + 'ab'.repeat(32),
      seed_encrypted: sealed,
    };
    await app.context.db('wallets').insert({ organization_id: org, network: 'testnet', ...row });
    const expected = { organizationId: org, network: 'testnet', address: row.address, publicKey: row.public_key, seedEncrypted: sealed };
    expect(await findWallet(app.context.db, org, 'testnet')).to.deep.equal(expected);
    // read again: the same row, whether from PostgreSQL or from the process's copy
    expect(await findWallet(app.context.db, org, 'testnet')).to.deep.equal(expected);
    expect(await findWallet(app.context.db, org, 'mainnet')).to.equal(undefined);
  });
});
