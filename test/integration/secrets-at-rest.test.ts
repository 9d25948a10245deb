import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { call, eventually } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { useStack } from '../helpers/workers';
import { WebhookReceiver } from '../helpers/receiver';
import { register } from '../helpers/registration';
import { walletSeedAad } from '../../shared/organizations/service';

/** Every value of every table of the database, as text. */
async function everything(db: import('knex').Knex): Promise<string> {
  const tables: string[] = await db('information_schema.tables')
    .where({ table_schema: 'public', table_type: 'BASE TABLE' })
    .pluck('table_name');
  const dumps = await Promise.all(
    tables.map(async (t) =>
      JSON.stringify(
        await db
          .raw(`SELECT row_to_json(x)::text AS row FROM ${db.client.wrapIdentifier(t)} x`)
          .then((r: { rows: { row: string }[] }) => r.rows.map((x) => x.row)),
      ),
    ),
  );
  return dumps.join('\n');
}

/** A secret as it might be stored by mistake: as is, hex, base64, base64url. */
const forms = (secret: Buffer | string) => {
  const bytes = Buffer.isBuffer(secret) ? secret : Buffer.from(secret);
  return [bytes.toString('hex'), bytes.toString('base64'), bytes.toString('base64url'), ...(Buffer.isBuffer(secret) ? [] : [secret])];
};

describe('secrets at rest', function () {
  this.timeout(120_000);
  const stack = useStack({ env: { REDIS_PREFIX: `at_rest_${Date.now()}` } });

  it('keeps tokens and access codes only hashed, webhook secrets and wallet seeds only encrypted', async () => {
    const app = stack.app;
    const receiver = await new WebhookReceiver().start();
    try {
      const org = await createOrg(app.context, 10_000);
      const key = await createKey(app.context, org, ['works:register', 'works:update', 'works:read'], receiver.url);
      const session = await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'someone' } });
      const r = await register(app.url, key.token);
      const [hook] = await receiver.waitFor(1);
      const accessCode = hook!.body.access_code as string;
      expect(accessCode).to.match(/^atc_[0-9a-f]{64}$/);
      const deliveryId = hook!.headers['x-service-delivery'] as string;
      await eventually(
        async () =>
          (await app.context.db('webhook_deliveries').where({ id: deliveryId, status: 'delivered' }).first()) ? true : undefined,
        'the delivery recorded',
      );

      const wallet = await app.context.db('wallets').where({ organization_id: org, network: 'testnet' }).first();
      const seed = app.context.box.open(wallet.seed_encrypted, walletSeedAad(org, 'testnet'));
      const dump = await everything(app.context.db);
      const secrets: [string, Buffer | string][] = [
        ['API key token', key.token],
        ['webhook secret', Buffer.from(key.webhookSecret, 'base64')],
        ['session token', session.body.session_token],
        ['access code', accessCode],
        ['wallet seed', seed],
      ];
      for (const [what, secret] of secrets)
        for (const form of forms(secret)) expect(dump.includes(form), `${what} stored in clear`).to.equal(false);
      seed.fill(0);

      // what is stored instead: the hashes, which match
      const keyRow = await app.context.db('api_keys').where({ id: key.id }).first();
      expect(Buffer.compare(keyRow.token_hash, createHash('sha256').update(key.token).digest())).to.equal(0);
      const work = await app.context.db('works').where({ id: r.jobId }).first();
      expect(Buffer.compare(work.access_code_hash, createHash('sha256').update(accessCode).digest())).to.equal(0);
    } finally {
      await receiver.stop();
    }
  });
});
