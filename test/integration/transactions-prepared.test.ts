import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { createDb } from '../../shared/db/knex';
import { SecretBox } from '../../shared/crypto/secret-box';
import { createOrganization } from '../../shared/organizations/service';
import { createApiKey } from '../../shared/api-keys/service';
import { findTransaction, insertTransaction, setCallOnce, updateTransaction } from '../../shared/transactions/repo';
import { enterStep } from '../../shared/transactions/steps';
import type { AnchorPayload } from '../../shared/transactions/anchor';
import { testServices, useOwnDatabase } from '../helpers/services';

/**
 * The transaction row's hot statements are named prepared statements (shared/db/knex.ts `prepared`), planned
 * once per connection. They name the columns they return, so a migration adding a column (a rolling deploy's
 * first step) leaves the statements every open connection already prepared working; and inside a SQL
 * transaction they run on the transaction's connection, so they commit and roll back with it.
 */
describe('transactions: prepared statements', function () {
  this.timeout(60_000);
  const own = useOwnDatabase('tx_prepared');
  // one connection, so the statement prepared before the migration is the one run after it
  let db: Knex;
  let organizationId: string;
  let apiKeyId: string;

  before(async () => {
    await own().migrate.latest();
    const url = (own().client.config.connection as { connectionString: string }).connectionString;
    db = createDb({ ...testServices().config.database, url, poolMax: 1 });
    const box = new SecretBox(randomBytes(32));
    organizationId = (await createOrganization({ db, box, chains: testServices().config.chains }, { name: 'prepared', credits: 0 }))
      .organization_id;
    apiKeyId = (
      await createApiKey({ db, box, allowHttpWebhooks: true, allowPrivateWebhooks: true }, organizationId, {
        name: 'k',
        scopes: ['works:register'],
      })
    ).key.id;
  });
  after(() => db?.destroy());

  const newTransaction = () =>
    db.transaction((trx) =>
      insertTransaction(trx, {
        id: randomUUID(),
        jobId: randomUUID(),
        organizationId,
        apiKeyId,
        network: 'testnet',
        type: 'register',
        steps: enterStep([], 'validating'),
        anchor: { protocol: 1 } as unknown as AnchorPayload,
        priceCredits: 7,
        atsId: 1,
        workId: null,
        externalUserRef: null,
        traceparent: null,
      }),
    );

  it('reads and writes a row as it stands, leaving a column given undefined as it was', async () => {
    const tx = await newTransaction();
    expect((await findTransaction(db, tx.id))!).to.deep.include({ id: tx.id, status: 'pending', priceCredits: 7, callHex: null });
    const steps = enterStep(tx.steps, 'preparing_transaction');
    const updated = await updateTransaction(db, tx.id, { current_step: 'preparing_transaction', steps, tx_hash: undefined }, true);
    expect(updated!.currentStep).to.equal('preparing_transaction');
    expect(updated!.steps.map((s) => s.name)).to.deep.equal(steps.map((s) => s.name));
    expect(updated!.updatedAt.getTime()).to.be.at.least(tx.updatedAt.getTime());
    expect(await updateTransaction(db, tx.id, { result: null })).to.equal(undefined);
    expect((await setCallOnce(db, tx.id, '0x01'))!.callHex).to.equal('0x01');
    expect(await setCallOnce(db, tx.id, '0x02'), 'the call is set once').to.equal(undefined);
    expect((await findTransaction(db, tx.id))!).to.deep.include({ callHex: '0x01', currentStep: 'preparing_transaction' });
    expect(await findTransaction(db, randomUUID())).to.equal(undefined);
  });

  it('keeps working on a connection that prepared them before a column was added', async () => {
    const tx = await newTransaction();
    await findTransaction(db, tx.id);
    await updateTransaction(db, tx.id, { current_step: 'signing' }, true);
    await db.raw('ALTER TABLE transactions ADD COLUMN added_by_a_later_release text');
    try {
      expect((await findTransaction(db, tx.id))!.currentStep).to.equal('signing');
      expect((await updateTransaction(db, tx.id, { current_step: 'submitting' }, true))!.currentStep).to.equal('submitting');
    } finally {
      await db.raw('ALTER TABLE transactions DROP COLUMN added_by_a_later_release');
    }
  });

  it('runs inside a SQL transaction on its connection: locked, and rolled back with it', async () => {
    const tx = await newTransaction();
    await db
      .transaction(async (trx) => {
        expect((await findTransaction(trx, tx.id, { forUpdate: true }))!.status).to.equal('pending');
        await updateTransaction(trx, tx.id, { status: 'failed', current_step: 'failed' });
        expect((await findTransaction(trx, tx.id))!.status, 'seen inside').to.equal('failed');
        throw new Error('roll back');
      })
      .catch((err: Error) => expect(err.message).to.equal('roll back'));
    expect((await findTransaction(db, tx.id))!.status, 'rolled back').to.equal('pending');
  });
});
