import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { createDb } from '../../shared/db/knex';
import { SecretBox } from '../../shared/crypto/secret-box';
import { createOrganization } from '../../shared/organizations/service';
import { createApiKey } from '../../shared/api-keys/service';
import { findTransaction, insertTransaction, setCallOnce, updateTransaction, updateTransactions } from '../../shared/transactions/repo';
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
    await updateTransaction(db, tx.id, { tx_hash: '0xaa' });
    const updated = await updateTransaction(db, tx.id, { current_step: 'preparing_transaction', steps, tx_hash: undefined }, true);
    expect(updated!.txHash, 'a column given undefined is left as it was').to.equal('0xaa');
    expect(updated!.currentStep).to.equal('preparing_transaction');
    expect(updated!.steps.map((s) => s.name)).to.deep.equal(steps.map((s) => s.name));
    expect(updated!.updatedAt.getTime()).to.be.at.least(tx.updatedAt.getTime());
    expect(await updateTransaction(db, tx.id, { result: null })).to.equal(undefined);
    const signing = enterStep(steps, 'signing');
    const called = (await setCallOnce(db, tx.id, '0x01', { currentStep: 'signing', steps: signing }))!;
    expect(called).to.deep.include({ callHex: '0x01', currentStep: 'signing' });
    expect(
      called.steps.map((s) => s.name),
      'the steps entered with the call',
    ).to.deep.equal(['validating', 'preparing_transaction', 'signing']);
    const again = await setCallOnce(db, tx.id, '0x02', { currentStep: 'submitting', steps: enterStep(signing, 'submitting') });
    expect(again, 'the call is set once').to.equal(undefined);
    expect((await findTransaction(db, tx.id))!, 'nor its steps').to.deep.include({ callHex: '0x01', currentStep: 'signing' });
    expect(await findTransaction(db, randomUUID())).to.equal(undefined);
  });

  it('changes many rows in one statement, each value read by its column type, before and after a column is added', async () => {
    const [a, b] = [await newTransaction(), await newTransaction()];
    const at = new Date('2026-11-27T10:11:12.345Z');
    const rowsOf = (t: typeof a, code: string) => ({
      id: t.id,
      current_step: 'failed',
      steps: enterStep(t.steps, 'failed', at),
      result: { error: { code, message: 'it\'s "quoted" \\ and ünïcode' } },
      submit_after: at,
      tx_hash: null,
    });
    const statements: string[] = [];
    const seen = (q: { sql: string }) => void statements.push(q.sql);
    db.on('query', seen);
    const changed = await updateTransactions(db, [rowsOf(a, 'a'), rowsOf(b, 'b')]).finally(() => db.off('query', seen));
    expect(statements, 'one statement').to.have.length(1);
    expect(changed.map((r) => r.id).sort()).to.deep.equal([a.id, b.id].sort());
    const back = (await findTransaction(db, b.id))!;
    expect(back.result).to.deep.equal({ error: { code: 'b', message: 'it\'s "quoted" \\ and ünïcode' } });
    expect(back.steps.map((s) => [s.name, s.at])).to.deep.equal(rowsOf(b, 'b').steps.map((s) => [s.name, s.at]));
    const types = await db('transactions')
      .where({ id: a.id })
      .first(
        db.raw('jsonb_typeof(steps) AS steps, jsonb_typeof(result) AS result, submit_after, tx_hash, updated_at > ? AS touched', [
          a.updatedAt,
        ]),
      );
    expect(types).to.deep.equal({ steps: 'array', result: 'object', submit_after: at, tx_hash: null, touched: true });
    await db.raw('ALTER TABLE transactions ADD COLUMN added_by_a_later_release text');
    try {
      // the same columns: the statement this connection prepared before the column was added
      const again = await updateTransactions(db, [{ ...rowsOf(a, 'again'), current_step: 'completed' }]);
      expect(
        again.map((r) => [r.currentStep, r.result]),
        'after the column was added',
      ).to.deep.equal([['completed', { error: { code: 'again', message: rowsOf(a, 'again').result.error.message } }]]);
    } finally {
      await db.raw('ALTER TABLE transactions DROP COLUMN added_by_a_later_release');
    }
    let refused: Error | undefined;
    await updateTransactions(db, [{ id: a.id, submit_after: db.raw('now()') }]).catch((err: Error) => (refused = err));
    expect(refused?.message).to.match(/values, not SQL \(submit_after\)/);
    await updateTransactions(db, [{ status: 'failed', id: a.id }]).catch((err: Error) => (refused = err));
    expect(refused?.message).to.match(/each row starts with its id/);
    // a value left out would be written NULL, not left as it was: refused
    await updateTransactions(db, [{ id: a.id, status: 'failed', tx_hash: undefined }]).catch((err: Error) => (refused = err));
    expect(refused?.message).to.match(/same columns, each with a value \(tx_hash\)/);
    await updateTransactions(db, [
      { id: b.id, status: 'failed' },
      { id: a.id, result: null },
    ]).catch((err: Error) => (refused = err));
    expect(refused?.message).to.match(/same columns, each with a value \(status\)/);
    for (const [value, why] of [
      [Number.NaN, /finite numbers and valid dates \(signings\)/],
      [new Date(Number.NaN), /finite numbers and valid dates \(signings\)/],
      [() => 1, /JSON's values \(signings\)/],
    ] as const) {
      const refusal = await updateTransactions(db, [{ id: a.id, signings: value }]).then(
        () => undefined,
        (err: Error) => err,
      );
      expect(refusal?.message, String(value)).to.match(why);
    }
    expect((await findTransaction(db, a.id))!.currentStep, 'no refusal changed it').to.equal('completed');
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

  it('takes values, not SQL: a knex expression is refused before anything is sent', async () => {
    const tx = await newTransaction();
    let refused: Error | undefined;
    await updateTransaction(db, tx.id, { status: 'failed', submit_after: db.raw('now()') }).catch((err: Error) => (refused = err));
    expect(refused?.message).to.match(/values, not SQL \(submit_after\)/);
    expect((await findTransaction(db, tx.id))!.status).to.equal('pending');
    expect((await updateTransaction(db, tx.id, { status: 'failed' }, true))!.status, 'the statement still works').to.equal('failed');
  });

  it('heals a connection whose statements a column type change broke: unnamed from then on', async () => {
    const tx = await newTransaction();
    await updateTransaction(db, tx.id, { tx_hash: '0xbb' });
    await findTransaction(db, tx.id);
    await db.transaction((trx) => findTransaction(trx, tx.id, { forUpdate: true }));
    await db.raw('ALTER TABLE transactions ALTER COLUMN tx_hash TYPE varchar(200)');
    try {
      // outside a SQL transaction: refused ("cached plan must not change result type"), then run again unnamed
      expect((await findTransaction(db, tx.id))!.txHash).to.equal('0xbb');
      expect((await findTransaction(db, tx.id))!.txHash).to.equal('0xbb');
      // inside one the refusal has aborted it: thrown once, and the caller's retry runs unnamed
      const locked = () => db.transaction((trx) => findTransaction(trx, tx.id, { forUpdate: true }));
      let first: (Error & { code?: string }) | undefined;
      await locked().catch((err: Error & { code?: string }) => (first = err));
      expect(first?.code).to.equal('0A000');
      expect((await locked())!.txHash).to.equal('0xbb');
    } finally {
      await db.raw('ALTER TABLE transactions ALTER COLUMN tx_hash TYPE text');
    }
  });

  it('refuses to run in a SQL transaction that has ended (its connection may serve another)', async () => {
    const tx = await newTransaction();
    let ended: Knex.Transaction | undefined;
    await db.transaction(async (trx) => {
      ended = trx;
    });
    let refused: Error | undefined;
    await findTransaction(ended!, tx.id).catch((err: Error) => (refused = err));
    expect(refused?.message).to.match(/transaction has already ended/);
  });

  it('runs inside a SQL transaction on its connection: locked, and rolled back with it', async () => {
    const tx = await newTransaction();
    await db
      .transaction(async (trx) => {
        expect((await findTransaction(trx, tx.id, { forUpdate: true }))!.status).to.equal('pending');
        // another session cannot take the row meanwhile
        let blocked: (Error & { code?: string }) | undefined;
        await own()
          .raw('SELECT id FROM transactions WHERE id = ? FOR UPDATE NOWAIT', [tx.id])
          .catch((err: Error & { code?: string }) => (blocked = err));
        expect(blocked?.code, 'lock_not_available').to.equal('55P03');
        await updateTransaction(trx, tx.id, { status: 'failed', current_step: 'failed' });
        expect((await findTransaction(trx, tx.id))!.status, 'seen inside').to.equal('failed');
        throw new Error('roll back');
      })
      .catch((err: Error) => expect(err.message).to.equal('roll back'));
    expect((await findTransaction(db, tx.id))!.status, 'rolled back').to.equal('pending');
  });
});
