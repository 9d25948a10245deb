import { expect } from 'chai';
import { startApp, type TestApp } from '../helpers/app';
import { createOrg } from '../helpers/factories';
import { appendLedgerEntry, balanceOf } from '../../shared/ledger/service';

describe('credit ledger', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  it('lets exactly the affordable debits through when 25 race for 100 credits', async () => {
    const org = await createOrg(app.context, 100);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 25 }, (_, i) =>
        app.context.db.transaction((trx) =>
          appendLedgerEntry(trx, { organizationId: org, kind: 'debit', amount: -10, reference: `tx-${i}` }),
        ),
      ),
    );
    const ok = outcomes.filter((o) => o.status === 'fulfilled');
    const refused = outcomes.filter((o) => o.status === 'rejected') as PromiseRejectedResult[];
    expect(ok).to.have.length(10);
    expect(refused).to.have.length(15);
    for (const r of refused) expect(r.reason.code).to.equal('credits.insufficient');
    expect(await balanceOf(app.context.db, org)).to.equal(0);
    const sum = await app.context.db('credit_ledger').where({ organization_id: org }).sum<{ sum: string }[]>('amount as sum');
    expect(Number(sum[0]!.sum)).to.equal(0);
  });

  it('charges once per reference, however often a retry asks', async () => {
    const org = await createOrg(app.context, 50);
    const first = await appendLedgerEntry(app.context.db, { organizationId: org, kind: 'debit', amount: -20, reference: 'tx-once' });
    const again = await appendLedgerEntry(app.context.db, { organizationId: org, kind: 'debit', amount: -20, reference: 'tx-once' });
    expect(first).to.deep.equal({ applied: true, balance: 30 });
    expect(again).to.deep.equal({ applied: false, balance: 30 });
    const racing = await Promise.allSettled(
      Array.from({ length: 5 }, () =>
        appendLedgerEntry(app.context.db, { organizationId: org, kind: 'refund', amount: 20, reference: 'tx-once' }),
      ),
    );
    expect(racing.filter((r) => r.status === 'fulfilled')).to.have.length.at.least(1);
    expect(await balanceOf(app.context.db, org)).to.equal(50);
  });

  it('is enforced by the database: no direct balance change, no edit or deletion of history, no overdraft', async () => {
    const org = await createOrg(app.context, 10);
    const db = app.context.db;
    await expectRejected(db('organizations').where({ id: org }).update({ credit_balance: 1_000_000 }), /only through credit_ledger/);
    await expectRejected(db('credit_ledger').where({ organization_id: org }).update({ amount: 999 }), /append-only/);
    await expectRejected(db('credit_ledger').where({ organization_id: org }).delete(), /append-only/);
    await expectRejected(
      db('credit_ledger').insert({ organization_id: org, kind: 'debit', amount: -11, balance_after: 0 }),
      /credit_balance_non_negative/,
    );
    await expectRejected(db('organizations').insert({ name: 'rich', credit_balance: 5 }), /starts at zero/);
    expect(await balanceOf(db, org)).to.equal(10);
  });
});

async function expectRejected(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
  try {
    await promise;
  } catch (err) {
    expect((err as Error).message).to.match(pattern);
    return;
  }
  expect.fail(`expected a database refusal matching ${pattern}`);
}
