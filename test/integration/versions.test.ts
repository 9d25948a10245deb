import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { call, eventually, expectError, startApp, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers, useStack } from '../helpers/workers';
import { WebhookReceiver, verifySignature, type Received } from '../helpers/receiver';
import { addVersion, creator, initBody, register, settled, urlLapse } from '../helpers/registration';
import { referenceCommitment } from '../helpers/commitment';
import { configWith, testServices } from '../helpers/services';
import { decodeAnchor, verifyAnchorSignature } from '../../shared/chain/remark-payload';
import { remarksOf, verifyAnchors, versionIsValid, type CallLike } from '../../shared/chain/verify';

const REGISTERED_FIELDS = [
  'event',
  'transaction_id',
  'organization_id',
  'api_key_id',
  'external_user_ref',
  'network',
  'ats_id',
  'tx_hash',
  'block_number',
  'block_hash',
  'access_code',
  'explorer_url',
  'finalized_at',
];

/** The hook for a transaction, once it has arrived. */
function hookFor(receiver: WebhookReceiver, txId: string): Promise<Received> {
  return eventually(async () => receiver.received.find((r) => r.body.transaction_id === txId), `the webhook of ${txId}`, 60_000);
}

describe('new versions of a registered work', function () {
  this.timeout(240_000);
  const stack = useStack({ env: { REDIS_PREFIX: `versions_${Date.now()}` } });
  let app: TestApp;
  let receiver: WebhookReceiver;
  let api: ApiPromise;
  before(async () => {
    app = stack.app;
    receiver = await new WebhookReceiver().start();
    api = await ApiPromise.create({ provider: new WsProvider(testServices().config.chains[0]!.wsUrl), noInitWarn: true });
  });
  after(async () => {
    await api.disconnect();
    await receiver.stop();
  });

  /** A finalized registration of a fresh organization; its key can register, update and read. */
  async function registered(ref?: string) {
    const org = await createOrg(app.context, 100_000);
    const key = await createKey(app.context, org, ['works:register', 'works:update', 'works:read'], receiver.url);
    const body = initBody(ref ? { external_user_ref: ref } : {});
    const r = await register(app.url, key.token, body);
    const tx = await settled(app.context, r.confirm.body.transaction_id);
    expect(tx.status).to.equal('finalized');
    return { org, key, body, audio: r.audio, atsId: Number(tx.ats_id), workId: tx.work_id as string };
  }

  it('adds a metadata-only version and an audio version, each anchored, signed and announced', async () => {
    const { org, key, body, audio, atsId, workId } = await registered();
    const wallet = await app.context.db('wallets').where({ organization_id: org, network: 'testnet' }).first();

    // v2: metadata only, the audio already anchored
    const creators2 = [creator({ full_name: 'Grace Hopper', email: 'grace@example.test' })];
    const v2 = await addVersion(app.url, key.token, atsId, { network: 'testnet', creators: creators2 });
    expect(Object.keys(v2.init.body)).to.deep.equal(['job_id']);
    expect(Object.keys(v2.prepare.body)).to.have.members([
      'job_id',
      'commitment',
      'version_deposit_credits',
      'network_fee_credits',
      'service_fee_credits',
      'storage_fee_credits',
      'total_price_credits',
      'is_valid',
      'expires_at',
    ]);
    const q2 = v2.prepare.body;
    expect(q2.commitment).to.equal(referenceCommitment(audio, body.title as string, creators2));
    expect(q2.storage_fee_credits).to.equal(0);
    expect(q2.total_price_credits).to.equal(
      q2.network_fee_credits + q2.version_deposit_credits + q2.service_fee_credits + q2.storage_fee_credits,
    );
    expect(v2.confirm.status).to.equal(202);

    // v3: new audio
    const audio3 = randomBytes(96 * 1024);
    const creators3 = [
      creator(),
      creator({ full_name: 'Alan Turing', roles: { arranger: true }, ipi: undefined, isni: undefined, email: undefined }),
    ];
    const tx2 = await settled(app.context, v2.confirm.body.transaction_id);
    const v3 = await addVersion(
      app.url,
      key.token,
      atsId,
      { network: 'testnet', filename: 'symphony-v3.flac', creators: creators3 },
      audio3,
    );
    expect(Object.keys(v3.init.body)).to.have.members(['job_id', 'upload_url', 'upload_expires_at']);
    expect(Date.parse(v3.init.body.upload_expires_at)).to.equal(urlLapse(v3.init.body.upload_url));
    expect(v3.prepare.body.commitment).to.equal(referenceCommitment(audio3, body.title as string, creators3));
    const tx3 = await settled(app.context, v3.confirm.body.transaction_id);

    for (const [tx, version, commitment] of [
      [tx2, 2, q2.commitment],
      [tx3, 3, v3.prepare.body.commitment],
    ] as const) {
      expect(tx.status).to.equal('finalized');
      const hook = await hookFor(receiver, tx.id);
      expect(verifySignature(key.webhookSecret, hook)).to.equal(true);
      expect(hook.headers['x-service-event']).to.equal('work_updated');
      expect(Object.keys(hook.body)).to.have.members([...REGISTERED_FIELDS, 'version']);
      expect(hook.body).to.deep.include({
        event: 'work_updated',
        transaction_id: tx.id,
        organization_id: org,
        ats_id: atsId,
        version,
        access_code: null,
        tx_hash: tx.tx_hash,
        external_user_ref: null,
      });
      // on chain: the version's remark names the work and the version, carries the commitment, signed by the owner
      const block = await api.rpc.chain.getBlock(hook.body.block_hash);
      const extrinsic = block.block.extrinsics.find((x) => x.hash.toHex() === hook.body.tx_hash)!;
      const anchor = remarksOf(extrinsic.method as unknown as CallLike)
        .map(decodeAnchor)
        .find((a) => Number(a.atsId) === atsId && a.version === version)!;
      expect(anchor.action).to.equal('update');
      expect('0x' + anchor.commitment.toString('hex')).to.equal(commitment);
      expect('0x' + anchor.ownerPublicKey.toString('hex')).to.equal(wallet.public_key);
      expect(verifyAnchorSignature(anchor, Buffer.from(api.genesisHash.toU8a()))).to.equal(true);
      const status = await call(app.url, 'GET', `/v1/transactions/${tx.id}`, { token: key.token });
      expect(status.body).to.deep.include({ transaction_type: 'add_version', status: 'finalized' });
      expect(status.body.result).to.deep.include({ ats_id: atsId, version, work_id: workId });
    }

    const work = await app.context.db('works').where({ id: workId }).first();
    expect(work).to.deep.include({
      latest_version: 3,
      latest_commitment: v3.prepare.body.commitment,
      asset_filename: 'symphony-v3.flac',
      title: (body.title as string).trim(),
    });
    expect(Number(work.ats_id)).to.equal(atsId);
    const versions = await app.context.db('work_versions').where({ work_id: workId }).orderBy('version');
    expect(versions.map((v) => [v.version, v.filename])).to.deep.equal([
      [1, 'symphony.wav'],
      [2, 'symphony.wav'],
      [3, 'symphony-v3.flac'],
    ]);
    expect(versions[1].audio_key).to.equal(versions[0].audio_key); // metadata-only: the audio it anchored
    expect(versions[1].media_hash).to.equal(versions[0].media_hash);

    // read back (issue 7): detail, versions, creators, and each version's audio, byte for byte
    const detail = await call(app.url, 'GET', `/v1/works/${atsId}?network=testnet`, { token: key.token });
    expect(detail.body).to.deep.include({
      id: workId,
      ats_id: atsId,
      latest_version: 3,
      asset_filename: 'symphony-v3.flac',
      versions_count: 3,
    });
    const listed = await call(app.url, 'GET', `/v1/works/${atsId}/versions?network=testnet`, { token: key.token });
    expect(listed.body.versions.map((v: { version: number; commitment: string }) => [v.version, v.commitment])).to.deep.equal(
      versions.map((v) => [v.version, v.commitment]),
    );
    const creatorsOf = async (v?: number) =>
      (await call(app.url, 'GET', `/v1/works/${atsId}/creators?network=testnet${v ? `&version=${v}` : ''}`, { token: key.token })).body;
    expect((await creatorsOf()).creators.map((c: { full_name: string }) => c.full_name)).to.deep.equal(creators3.map((c) => c.full_name));
    expect((await creatorsOf(2)).creators.map((c: { full_name: string }) => c.full_name)).to.deep.equal(['Grace Hopper']);
    for (const [v, bytes] of [
      [1, audio],
      [2, audio],
      [3, audio3],
    ] as const) {
      const link = await call(app.url, 'GET', `/v1/works/${workId}/versions/${v}/download/audio`, { token: key.token });
      expect(link.status).to.equal(200);
      const got = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
      expect(got.equals(bytes), `the audio of version ${v}`).to.equal(true);
    }

    // the verifier CLI's check passes for every version
    const checks = await verifyAnchors(app.context.chains, 'testnet', {
      atsId,
      ownerPublicKey: wallet.public_key,
      versions: versions.map((v) => ({ version: v.version, commitment: v.commitment, blockHash: v.block_hash, txHash: v.tx_hash })),
    });
    expect(checks.map(versionIsValid)).to.deep.equal([true, true, true]);
  });

  it('applies the ref rules of docs/api.md#external-user-references', async () => {
    const tagged = await registered('end-user-7');
    const untagged = await registered();
    const init = (w: { key: { token: string }; atsId: number }, ref?: string) =>
      call(app.url, 'POST', `/v1/works/${w.atsId}/versions/init`, {
        token: w.key.token,
        body: { network: 'testnet', creators: [creator()], ...(ref ? { external_user_ref: ref } : {}) },
      });

    expect((await init(tagged, 'end-user-7')).status).to.equal(200);
    expectError(await init(tagged, 'end-user-8'), 403, 'common.forbidden');
    expectError(await init(untagged, 'end-user-7'), 403, 'common.forbidden');
    // without a ref, a write is organization-wide: tagged and untagged works alike
    expect((await init(tagged)).status).to.equal(200);
    expect((await init(untagged)).status).to.equal(200);

    // the work keeps its ref: a version written without one still belongs to end-user-7
    const v = await addVersion(app.url, tagged.key.token, tagged.atsId, { network: 'testnet', creators: [creator()] });
    const tx = await settled(app.context, v.confirm.body.transaction_id);
    expect(tx.external_user_ref).to.equal('end-user-7');
    expect((await hookFor(receiver, tx.id)).body.external_user_ref).to.equal('end-user-7');
    expect((await app.context.db('works').where({ id: tagged.workId }).first()).external_user_ref).to.equal('end-user-7');
  });

  it('answers 404 for another organization’s work and an unknown ats_id', async () => {
    const mine = await registered();
    const theirs = await registered();
    const body = { network: 'testnet', creators: [creator()] };
    expectError(
      await call(app.url, 'POST', `/v1/works/${theirs.atsId}/versions/init`, { token: mine.key.token, body }),
      404,
      'common.not_found',
    );
    expectError(
      await call(app.url, 'POST', `/v1/works/999999999/versions/init-upload`, {
        token: mine.key.token,
        body: { ...body, filename: 'x.wav' },
      }),
      404,
      'common.not_found',
    );
    expectError(
      await call(app.url, 'POST', `/v1/works/not-a-number/versions/init`, { token: mine.key.token, body }),
      404,
      'common.not_found',
    );
    // the network selects the chain whose ats_id is meant; one this deployment does not run is refused
    expectError(
      await call(app.url, 'POST', `/v1/works/${mine.atsId}/versions/init`, {
        token: mine.key.token,
        body: { ...body, network: 'mainnet' },
      }),
      422,
      'common.validation_failed',
    );
    // a version job cannot be prepared or confirmed under another work's ats_id
    const init = await call(app.url, 'POST', `/v1/works/${mine.atsId}/versions/init`, { token: mine.key.token, body });
    expectError(
      await call(app.url, 'POST', `/v1/works/${mine.atsId + 1}/versions/prepare`, {
        token: mine.key.token,
        body: { job_id: init.body.job_id },
      }),
      404,
      'registration.upload_session_not_found',
    );
    // a title is not part of a version, and a registration-only key may not write versions
    expectError(
      await call(app.url, 'POST', `/v1/works/${mine.atsId}/versions/init`, { token: mine.key.token, body: { ...body, title: 'x' } }),
      422,
      'common.validation_failed',
    );
    const registerOnly = await createKey(app.context, mine.org, ['works:register']);
    expectError(
      await call(app.url, 'POST', `/v1/works/${mine.atsId}/versions/init`, { token: registerOnly.token, body }),
      403,
      'auth.insufficient_scope',
    );
  });

  it('numbers two concurrent version confirms of one work 2 and 3', async () => {
    const { key, atsId, workId } = await registered();
    const body = { network: 'testnet', creators: [creator()] };
    const jobs = [];
    for (let i = 0; i < 2; i++) {
      const init = await call(app.url, 'POST', `/v1/works/${atsId}/versions/init`, {
        token: key.token,
        body: { ...body, creators: [creator({ full_name: `Creator ${i}` })] },
      });
      expect(
        (await call(app.url, 'POST', `/v1/works/${atsId}/versions/prepare`, { token: key.token, body: { job_id: init.body.job_id } }))
          .status,
      ).to.equal(200);
      jobs.push(init.body.job_id as string);
    }
    const confirms = await Promise.all(
      jobs.map((job) => call(app.url, 'POST', `/v1/works/${atsId}/versions/confirm`, { token: key.token, body: { job_id: job } })),
    );
    expect(confirms.map((c) => c.status)).to.deep.equal([202, 202]);
    const txs = await Promise.all(confirms.map((c) => settled(app.context, c.body.transaction_id)));
    expect(txs.map((t) => t.status)).to.deep.equal(['finalized', 'finalized']);
    expect(txs.map((t) => t.version).sort()).to.deep.equal([2, 3]);
    expect(await app.context.db('work_versions').where({ work_id: workId }).orderBy('version').pluck('version')).to.deep.equal([1, 2, 3]);
    expect((await app.context.db('works').where({ id: workId }).first()).latest_version).to.equal(3);
  });

  it('refunds a failed version in full and announces work_failed', async () => {
    const { org, key, atsId, workId } = await registered();
    // the web and prepare as usual; the only chain worker of this key space has a relayer without funds
    const prefix = `versions_refused_${Date.now()}`;
    const web = await startApp(configWith({ REDIS_PREFIX: prefix }));
    const preparer = await startTestWorkers(configWith({ REDIS_PREFIX: prefix }), ['prepare', 'webhooks']);
    // sent again until CHAIN_GIVE_UP_AFTER (the relayer, not the call, is in the way), then refunded
    const broke = await startTestWorkers(
      configWith({ REDIS_PREFIX: prefix, RELAYER_SEED_TESTNET: '//NobodyFundedThisEither', CHAIN_GIVE_UP_AFTER: '4' }),
      ['chain'],
    );
    try {
      const balance = async () => Number((await app.context.db('organizations').where({ id: org }).first()).credit_balance);
      const before = await balance();
      const v = await addVersion(web.url, key.token, atsId, { network: 'testnet', creators: [creator()] });
      expect(v.confirm.status).to.equal(202);
      expect(await balance()).to.equal(before - v.prepare.body.total_price_credits);
      const tx = await settled(app.context, v.confirm.body.transaction_id);
      expect(tx.status).to.equal('failed');
      const hook = await hookFor(receiver, tx.id);
      expect(verifySignature(key.webhookSecret, hook)).to.equal(true);
      expect(hook.body).to.deep.include({ event: 'work_failed', ats_id: atsId, reason: 'chain.submission_rejected' });
      expect(await balance()).to.equal(before);
      const ledger = await app.context.db('credit_ledger').where({ reference: tx.id }).orderBy('id');
      expect(ledger.map((e) => [e.kind, Number(e.amount)])).to.deep.equal([
        ['debit', -v.prepare.body.total_price_credits],
        ['refund', v.prepare.body.total_price_credits],
      ]);
      expect((await app.context.db('works').where({ id: workId }).first()).latest_version).to.equal(1);
    } finally {
      await broke.stop();
      await preparer.stop();
      await web.close();
    }
  });
});
