import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { startApp, call, eventually, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers, type TestWorkers } from '../helpers/workers';
import { WebhookReceiver, verifySignature } from '../helpers/receiver';
import { register, initBody } from '../helpers/registration';
import { testServices } from '../helpers/services';
import { referenceCommitment } from '../helpers/commitment';
import { decodeAnchor, verifyAnchorSignature } from '../../shared/chain/remark-payload';
import { remarksOf, type CallLike } from '../../shared/chain/verify';

describe('registration, end to end on the local chain', function () {
  this.timeout(120_000);
  let app: TestApp;
  let workers: TestWorkers;
  let receiver: WebhookReceiver;
  let api: ApiPromise;

  before(async () => {
    app = await startApp();
    workers = await startTestWorkers();
    receiver = await new WebhookReceiver().start();
    api = await ApiPromise.create({ provider: new WsProvider(testServices().config.chains[0]!.wsUrl), noInitWarn: true });
  });
  after(async () => {
    await api.disconnect();
    await receiver.stop();
    await workers.stop();
    await app.close();
  });

  for (const ref of [undefined, 'end-user-42']) {
    it(`registers a work ${ref ? 'with' : 'without'} external_user_ref and delivers a signed work_registered`, async () => {
      const org = await createOrg(app.context, 1000);
      const key = await createKey(app.context, org, ['works:register'], receiver.url);
      const before = receiver.received.length;
      const body = initBody(ref ? { external_user_ref: ref } : {});
      const r = await register(app.url, key.token, body);

      // the quote (docs/api.md#quotes-and-pricing)
      const q = r.prepare.body;
      expect(Object.keys(q)).to.have.members([
        'job_id',
        'work_id',
        'commitment',
        'network_fee_credits',
        'total_deposit_credits',
        'service_fee_credits',
        'storage_fee_credits',
        'total_price_credits',
        'is_valid',
        'expires_at',
      ]);
      expect(q.job_id).to.equal(r.jobId);
      expect(q.work_id).to.equal(r.jobId);
      expect(q.is_valid).to.equal(true);
      expect(q.commitment).to.equal(referenceCommitment(r.audio, body.title as string, body.creators as Record<string, any>[]));
      expect(q.total_price_credits).to.equal(
        q.network_fee_credits + q.total_deposit_credits + q.service_fee_credits + q.storage_fee_credits,
      );
      const ttl = new Date(q.expires_at).getTime() - Date.now();
      expect(ttl).to.be.within(200_000, 300_000);

      // the handle (docs/api.md#registration-confirm)
      expect(r.confirm.status).to.equal(202);
      const txId = r.confirm.body.transaction_id;
      expect(r.confirm.body).to.deep.equal({
        transaction_id: txId,
        ws_url: `/v1/ws/transactions/${txId}`,
        status_url: `/v1/transactions/${txId}`,
      });

      const [hook] = (await receiver.waitFor(before + 1)).slice(before);
      expect(verifySignature(key.webhookSecret, hook!)).to.equal(true);
      expect(hook!.headers['x-service-event']).to.equal('work_registered');
      expect(hook!.headers['content-type']).to.equal('application/json');
      expect(hook!.headers['x-service-delivery']).to.match(/^[0-9a-f-]{36}$/);
      const p = hook!.body;
      expect(Object.keys(p)).to.have.members([
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
      ]);
      expect(p).to.deep.include({
        event: 'work_registered',
        transaction_id: txId,
        organization_id: org,
        api_key_id: key.id,
        external_user_ref: ref ?? null,
        network: 'testnet',
      });
      expect(p.ats_id).to.be.a('number');
      expect(p.tx_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect(p.block_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect(p.block_number).to.be.a('number');
      expect(new Date(p.finalized_at).toISOString()).to.equal(p.finalized_at);
      if (ref) expect(p.access_code).to.equal(null);
      else {
        expect(p.access_code).to.match(/^atc_[0-9a-f]{64}$/);
        const work = await app.context.db('works').where({ id: r.jobId }).first();
        expect(Buffer.compare(work.access_code_hash, createHash('sha256').update(p.access_code).digest())).to.equal(0);
        // once delivered, nothing decryptable is kept: only the SHA-256 (docs/api.md#registration-confirm)
        const sealed = await eventually(async () => {
          const delivery = await app.context
            .db('webhook_deliveries as d')
            .join('events as e', 'e.id', 'd.event_id')
            .where({ 'e.transaction_id': txId, 'e.type': 'work_registered' })
            .first('d.sealed_access_code', 'd.status');
          return delivery && delivery.status === 'delivered' && delivery.sealed_access_code === null ? true : undefined;
        }, 'the sealed access code to be dropped');
        expect(sealed).to.equal(true);
      }
      // outside production the link opens the local chain's block in polkadot.js apps (shared/config.ts)
      const node = testServices().config.chains[0]!.wsUrl;
      expect(p.explorer_url).to.equal(`https://polkadot.js.org/apps/?rpc=${encodeURIComponent(node)}#/explorer/query/${p.block_number}`);
      expect(node).to.match(/^ws:\/\/127\.0\.0\.1:\d+$/);

      // its jobs as support staff find them in Bull Board: named and labelled with the organization, the
      // transaction, the type or event and the webhook's host, and nothing else (no secret, no title, no creator)
      const chainJob = (await app.context.queues.chain.getJob(txId))!;
      expect(chainJob.name).to.equal(`transaction register testnet org:${org} tx:${txId}`);
      expect(chainJob.data).to.deep.equal({ transactionId: txId, organizationId: org, type: 'register', network: 'testnet' });
      const deliveryId = String(hook!.headers['x-service-delivery']);
      const host = new URL(receiver.url).host;
      const deliveryJob = (await app.context.queues.webhooks.getJob(deliveryId))!;
      expect(deliveryJob.name).to.equal(`deliver work_registered org:${org} tx:${txId} host:${host}`);
      expect(deliveryJob.data).to.deep.equal({ deliveryId, organizationId: org, transactionId: txId, event: 'work_registered', host });

      // on chain: the block holds the extrinsic, whose remark carries the commitment, signed by the owner
      const block = await api.rpc.chain.getBlock(p.block_hash);
      expect(block.block.header.number.toNumber()).to.equal(p.block_number);
      const extrinsic = block.block.extrinsics.find((x) => x.hash.toHex() === p.tx_hash);
      expect(extrinsic, 'extrinsic in its block').to.not.equal(undefined);
      // the relayer's utility batch; this registration's remark is among its calls
      expect(`${extrinsic!.method.section}.${extrinsic!.method.method}`).to.be.oneOf(['utility.batch', 'utility.forceBatch']);
      const anchor = remarksOf(extrinsic!.method as unknown as CallLike)
        .map(decodeAnchor)
        .find((a) => Number(a.atsId) === p.ats_id)!;
      expect('0x' + anchor.commitment.toString('hex')).to.equal(q.commitment);
      expect(Number(anchor.atsId)).to.equal(p.ats_id);
      expect(verifyAnchorSignature(anchor, Buffer.from(api.genesisHash.toU8a()))).to.equal(true);
      const wallet = await app.context.db('wallets').where({ organization_id: org, network: 'testnet' }).first();
      expect('0x' + anchor.ownerPublicKey.toString('hex')).to.equal(wallet.public_key);

      // money: exactly the quoted total
      const balance = (await app.context.db('organizations').where({ id: org }).first()).credit_balance;
      expect(Number(balance)).to.equal(1000 - q.total_price_credits);

      // polling shows the finalized transaction
      const status = await call(app.url, 'GET', `/v1/transactions/${txId}`, { token: key.token });
      expect(status.status).to.equal(200);
      expect(status.body).to.deep.include({
        transaction_id: txId,
        transaction_type: 'register',
        network: 'testnet',
        status: 'finalized',
        current_step: 'completed',
        progress: 100,
        is_complete: true,
      });
      expect(status.body.steps.map((s: { name: string }) => s.name)).to.deep.equal([
        'validating',
        'preparing_transaction',
        'signing',
        'submitting',
        'confirming',
        'completed',
      ]);
      expect(status.body.result).to.deep.include({
        ats_id: p.ats_id,
        version: 1,
        work_id: r.jobId,
        tx_hash: p.tx_hash,
        block_hash: p.block_hash,
        block_number: p.block_number,
        explorer_url: p.explorer_url,
      });
    });
  }
});
