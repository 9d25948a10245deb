import { expect } from 'chai';
import path from 'node:path';
import http from 'node:http';
import { startApp, call, eventually, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { startTestWorkers } from '../helpers/workers';
import { WebhookReceiver, verifySignature } from '../helpers/receiver';
import { register } from '../helpers/registration';
import { ApiPromise, Keyring, WsProvider } from '@polkadot/api';
import { configWith, testServices } from '../helpers/services';
import { admin } from '../helpers/cli';
import { ensureDevIdpKey } from '../../shared/dev/identity-provider';
import { createWebApp } from '../../web/app';

describe('operator CLI (docs/api.md#operator-cli)', function () {
  this.timeout(120_000);
  let app: TestApp;
  let env: Record<string, string | undefined>;
  let server: http.Server;

  before(async () => {
    // A web app in development shape: the embedded identity provider's JWKS served by the app itself.
    server = http.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const keyFile = path.join(testServices().dataDir, 'cli-idp.json');
    await ensureDevIdpKey(keyFile);
    env = {
      ...testServices().env,
      DEV_IDP_KEY_FILE: keyFile,
      OIDC_ISSUER: `${base}/dev/idp`,
      OIDC_JWKS_URL: `${base}/dev/idp/jwks.json`,
      NODE_ENV: 'development',
    };
    app = await startApp(configWith(env));
    server.on('request', createWebApp(app.context).callback());
    (app as { url: string }).url = base;
  });
  after(async () => {
    server.close();
    await app.close();
  });

  it('creates, shows, credits, suspends and activates an organization', async () => {
    const created = await admin(['org', 'create', '--name', 'Acme', '--credits', '1000'], env);
    expect(created.code).to.equal(0);
    expect(Object.keys(created.out)).to.have.members(['organization_id', 'name', 'status', 'credits', 'wallets']);
    expect(created.out).to.deep.include({ name: 'Acme', status: 'active', credits: 1000 });
    expect(created.out.wallets.testnet).to.be.a('string');
    expect(created.out.wallets.mainnet).to.be.a('string');
    const id = created.out.organization_id;

    const credited = await admin(['org', 'credit', '--org', id, '--amount', '250', '--reason', 'top-up'], env);
    expect(credited.out).to.deep.equal({ organization_id: id, credits: 1250 });
    expect((await admin(['org', 'suspend', '--org', id], env)).out).to.deep.equal({ organization_id: id, status: 'suspended' });
    expect((await admin(['org', 'show', '--org', id], env)).out).to.deep.include({ status: 'suspended', credits: 1250 });
    expect((await admin(['org', 'activate', '--org', id], env)).out).to.deep.equal({ organization_id: id, status: 'active' });
  });

  it('mints an admin token that creates a working key through the API', async () => {
    const { out: org } = await admin(['org', 'create', '--name', 'Tokens'], env);
    const minted = await admin(['idp', 'token', '--org', org.organization_id, '--ttl', '600'], env);
    expect(minted.code).to.equal(0);
    expect(Object.keys(minted.out)).to.have.members(['token', 'expires_at']);
    const created = await call(app.url, 'POST', `/v1/organizations/${org.organization_id}/api-keys`, {
      token: minted.out.token,
      body: { name: 'backend', scopes: ['works:read'] },
    });
    expect(created.status, created.text).to.equal(201);
    const session = await call(app.url, 'POST', '/v1/sessions', { token: created.body.token, body: { external_user_ref: 'u1' } });
    expect(session.status).to.equal(201);
    // an operator token opens the operator tools, not the organization's routes
    const operator = await admin(['idp', 'token', '--org', org.organization_id, '--role', 'operator'], env);
    expect(operator.code).to.equal(0);
    expect((await call(app.url, 'GET', '/metrics', { token: operator.out.token })).status).to.equal(200);
    expect(
      (await call(app.url, 'GET', `/v1/organizations/${org.organization_id}/api-keys`, { token: operator.out.token })).status,
    ).to.equal(403);
    // and no token outlives ADMIN_TOKEN_MAX_AGE
    expect((await admin(['idp', 'token', '--org', org.organization_id, '--ttl', '7200'], env)).code).to.not.equal(0);
  });

  it('lists dead webhook deliveries and retries one, which arrives signed afresh as the same delivery', async () => {
    const workers = await startTestWorkers(testServices().config, ['prepare', 'chain', 'webhooks']);
    const receiver = await new WebhookReceiver().start();
    receiver.respond = (_req, index) => ({ status: index === 0 ? 400 : 200 });
    try {
      const org = await createOrg(app.context, 1000);
      const key = await createKey(app.context, org, ['works:register'], receiver.url);
      await register(app.url, key.token);
      const [refused] = await receiver.waitFor(1);
      const deliveryId = refused!.headers['x-service-delivery'] as string;
      await eventually(
        async () => ((await app.context.db('webhook_deliveries').where({ id: deliveryId }).first()).status === 'dead' ? true : undefined),
        'the delivery to die',
      );
      const deadLetters = app.context.queues['webhooks-dead'];
      const deadLetter = (await eventually(() => deadLetters.getJob(deliveryId), 'the dead letter'))!;
      expect(deadLetter.id).to.equal(deliveryId);
      // its data: the delivery and what support staff search by (README, "Finding a job"), parked or not yet
      expect(deadLetter.data).to.deep.include({ deliveryId, event: 'work_registered', organizationId: org });

      const dead = await admin(['webhooks', 'dead'], env);
      expect(dead.code).to.equal(0);
      const entry = dead.out.deliveries.find((d: { id: string }) => d.id === deliveryId);
      expect(entry).to.deep.include({ id: deliveryId, event: 'work_registered', url: receiver.url, attempts: 1, last_status_code: 400 });

      const retried = await admin(['webhooks', 'retry', '--delivery', deliveryId], env);
      expect(retried.out).to.deep.equal({ retried: 1 });
      const [, again] = await receiver.waitFor(2);
      expect(again!.headers['x-service-delivery']).to.equal(deliveryId);
      // the same event, but the access code was destroyed when the delivery died (only its SHA-256 is kept)
      expect(refused!.body.access_code).to.match(/^atc_/);
      expect(again!.body).to.deep.equal({ ...refused!.body, access_code: null });
      expect(verifySignature(key.webhookSecret, again!)).to.equal(true);
      const row = await eventually(async () => {
        const d = await app.context.db('webhook_deliveries').where({ id: deliveryId }).first();
        return d.status === 'delivered' ? d : undefined;
      }, 'the retried delivery');
      expect(row.attempts).to.equal(2);
      expect(
        await app.context.db('webhook_attempts').where({ delivery_id: deliveryId }).orderBy('attempt').pluck('status_code'),
      ).to.deep.equal([400, 200]);
      expect(await deadLetters.getJob(deliveryId), 'the dead letter left its queue').to.equal(undefined);
      expect((await admin(['webhooks', 'retry', '--delivery', deliveryId], env)).err.error.code).to.equal('common.not_found');
      expect((await admin(['webhooks', 'retry', '--all-dead', '--delivery', deliveryId], env)).err.error.code).to.equal(
        'common.bad_request',
      );
    } finally {
      await receiver.stop();
      await workers.stop();
    }
  });

  it('verify re-reads the chain: accepts a real registration, rejects one whose remark was altered', async () => {
    const workers = await startTestWorkers(testServices().config, ['prepare', 'chain']);
    const api = await ApiPromise.create({ provider: new WsProvider(testServices().config.chains[0]!.wsUrl), noInitWarn: true });
    try {
      const key = await createKey(app.context, await createOrg(app.context, 1000));
      const r = await register(app.url, key.token);
      const txId = r.confirm.body.transaction_id;
      const tx = await eventually(async () => {
        const row = await app.context.db('transactions').where({ id: txId }).first();
        return row.status === 'finalized' ? row : undefined;
      }, 'finality');
      const ok = await admin(['verify', '--network', 'testnet', '--ats-id', String(tx.ats_id)], env);
      expect(ok.code, JSON.stringify(ok.err)).to.equal(0);
      expect(ok.out).to.deep.include({ network: 'testnet', ats_id: Number(tx.ats_id), valid: true });
      expect(ok.out.versions[0]).to.deep.include({
        version: 1,
        found: true,
        commitment: true,
        ats_id: true,
        version_number: true,
        owner: true,
        signature: true,
      });

      // Put an altered copy of the remark on chain (one commitment byte changed) and point the index at it.
      const block = await api.rpc.chain.getBlock(tx.block_hash);
      const original = block.block.extrinsics.find((x) => x.hash.toHex() === tx.tx_hash)!;
      // the relayer's extrinsic is a utility batch; this registration's remark is its only call
      expect(original.method.section).to.equal('utility');
      const [remark] = original.method.args[0] as unknown as { method: string; args: { toU8a(bare: boolean): Uint8Array }[] }[];
      expect(remark!.method).to.equal('remarkWithEvent');
      const altered = Buffer.from(remark!.args[0]!.toU8a(true));
      altered[20] = altered[20]! ^ 0x01;
      const relayer = new Keyring({ type: 'sr25519' }).addFromUri(testServices().config.chains[0]!.relayerSeed);
      const inBlock = await new Promise<{ blockHash: string; txHash: string }>((resolve, reject) => {
        const submitted = api.tx.system.remarkWithEvent(`0x${altered.toString('hex')}`);
        submitted
          .signAndSend(relayer, (result) => {
            if (result.status.isInBlock) resolve({ blockHash: result.status.asInBlock.toHex(), txHash: submitted.hash.toHex() });
          })
          .catch(reject);
      });
      await app.context
        .db('work_versions')
        .where({ transaction_id: txId })
        .update({
          block_hash: inBlock.blockHash,
          tx_hash: inBlock.txHash,
          commitment: `0x${altered.subarray(20, 52).toString('hex')}`,
        });
      const refused = await admin(['verify', '--network', 'testnet', '--ats-id', String(tx.ats_id)], env);
      expect(refused.code).to.not.equal(0);
      expect(refused.err.error.code).to.equal('verification.failed');
      const detail = JSON.parse(refused.err.error.details[0].message);
      expect(detail).to.deep.include({ found: true, commitment: true, owner: true, signature: false });
      expect((await admin(['verify', '--network', 'testnet', '--ats-id', '999999'], env)).err.error.code).to.equal('common.not_found');
    } finally {
      await api.disconnect();
      await workers.stop();
    }
  });

  it('prints an error envelope on stderr and exits non-zero', async () => {
    const missing = await admin(['org', 'show', '--org', '00000000-0000-4000-8000-000000000000'], env);
    expect(missing.code).to.not.equal(0);
    expect(missing.err.error.code).to.equal('common.not_found');
    expect(missing.err.error.request_id).to.be.a('string');
    const unknown = await admin(['org', 'explode'], env);
    expect(unknown.err.error.code).to.equal('common.bad_request');
    const overdraw = await admin(['org', 'create', '--name', 'Poor'], env);
    const debit = await admin(['org', 'credit', '--org', overdraw.out.organization_id, '--amount=-5'], env);
    expect(debit.err.error.code).to.equal('credits.insufficient');
  });
});
