import { expect } from 'chai';
import { startApp, call, eventually, expectError, testLogger, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { useStack } from '../helpers/workers';
import { quote } from '../helpers/registration';
import { configWith } from '../helpers/services';
import { openResources } from '../../shared/resources';
import { createDb } from '../../shared/db/knex';

/**
 * A web process's PostgreSQL statements end within WEB_STATEMENT_TIMEOUT_MS (shared/db/knex.ts `createDb`): a request
 * stuck behind a lock someone else holds answers 503 in the error envelope and leaves nothing behind, rather than
 * hold its connection (and its caller) for as long as the lock is held.
 */
describe("the web's statement timeout", function () {
  this.timeout(120_000);
  const stack = useStack();
  let app: TestApp;
  // a web process like any other, with a statement timeout short enough to meet in a test
  let bounded: TestApp;
  before(async () => {
    app = stack.app;
    bounded = await startApp(configWith({ WEB_STATEMENT_TIMEOUT_MS: '300' }));
  });
  after(() => bounded?.close());

  const balance = async (org: string) => Number((await app.context.db('organizations').where({ id: org }).first()).credit_balance);
  const setting = async (db: TestApp['context']['db']) => (await db.raw('SHOW statement_timeout')).rows[0].statement_timeout as string;

  it("is set on the web role's connections only: 5 s by default, the configured value, none for a worker or a tool", async () => {
    expect(await setting(app.context.db)).to.equal('5s');
    expect(await setting(bounded.context.db)).to.equal('300ms');
    const config = configWith({ WEB_STATEMENT_TIMEOUT_MS: '300' });
    const worker = openResources(config, testLogger(), { worker: ['webhooks'] });
    // the tools' pool (the CLI, migrations, the benches' set-up)
    const tool = createDb(config.database);
    try {
      expect(await setting(worker.db)).to.equal('0');
      expect(await setting(tool)).to.equal('0');
    } finally {
      await worker.close();
      await tool.destroy();
    }
  });

  it('a confirm whose debit waits on a lock past it answers 503 and changes nothing; once the lock is gone it is charged once', async () => {
    const org = await createOrg(app.context, 1000);
    const key = await createKey(app.context, org);
    const job = await quote(app.url, key.token);
    const price = job.prepare.body.total_price_credits as number;
    const confirm = () => call(bounded.url, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: job.jobId } });

    // another session holds the organization's row (as a long credit or an operator's open psql would): the confirm's
    // insert of its transaction (a key share of that row) and its debit wait for it
    const holder = await app.context.db.transaction();
    try {
      await holder('organizations').where({ id: org }).forUpdate().first();
      // bounded only so that a failure shows as one, not as a hang: without the timeout the confirm waits for the
      // holder, which lets go here after 30 s, and then succeeds
      const letGo = setTimeout(() => void holder.rollback().catch(() => undefined), 30_000);
      const refused = await confirm().finally(() => clearTimeout(letGo));
      expect(holder.isCompleted(), 'answered while the lock was still held').to.equal(false);
      expectError(refused, 503, 'common.service_unavailable');
      expect(refused.headers.get('retry-after')).to.equal('5');
    } finally {
      if (!holder.isCompleted()) await holder.rollback();
    }
    // nothing was written: no transaction, no ledger entry, the balance as it was, and no session left waiting
    expect(await app.context.db('transactions').where({ job_id: job.jobId }).first()).to.equal(undefined);
    expect(await app.context.db('credit_ledger').where({ organization_id: org, kind: 'debit' })).to.deep.equal([]);
    expect(await balance(org)).to.equal(1000);
    await eventually(async () => {
      const waiting = await app.context
        .db('pg_stat_activity')
        .where({ datname: app.context.db.raw('current_database()'), wait_event_type: 'Lock' })
        .whereLike('query', '%transactions%');
      return waiting.length === 0 ? true : undefined;
    }, 'no statement of the refused confirm still waiting');

    // the job went back to its quote: the same confirm, the lock gone, is charged once
    const accepted = await confirm();
    expect(accepted.status, accepted.text).to.equal(202);
    expect(await balance(org)).to.equal(1000 - price);
    const debits = await app.context.db('credit_ledger').where({ organization_id: org, kind: 'debit' }).select('amount', 'reference');
    expect(debits).to.deep.equal([{ amount: String(-price), reference: accepted.body.transaction_id }]);
    expectError(await confirm(), 404, 'registration.prepared_not_found');
  });
});
