import net from 'node:net';
import { expect } from 'chai';
import { startApp, call, eventually, expectError, testLogger, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { useStack } from '../helpers/workers';
import { quote } from '../helpers/registration';
import { configWith, testServices } from '../helpers/services';
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
  it('a PostgreSQL that stops answering: the request answers 503 and the pool lends that connection no more', async () => {
    const proxy = await startFreezableProxy(new URL(testServices().config.database.url));
    // one connection, so that a stuck one lent again would fail the request after the thaw
    const web = await startApp(configWith({ DATABASE_URL: proxy.databaseUrl, DATABASE_POOL_MAX: '1', WEB_STATEMENT_TIMEOUT_MS: '300' }));
    try {
      const key = await createKey(app.context, await createOrg(app.context));
      const list = () => call(web.url, 'GET', '/v1/works', { token: key.token });
      expect((await list()).status).to.equal(200);
      expect(proxy.opened).to.equal(1);

      proxy.freeze();
      // bounded only so that a failure shows as one, not as a hang: unbounded, the request waits for TCP to give up
      const hung = new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 30_000).unref());
      const refused = await Promise.race([list(), hung]);
      expect(refused, 'still waiting for a server that does not answer').to.not.equal('hung');
      if (refused === 'hung') return;
      expectError(refused, 503, 'common.service_unavailable');

      proxy.thaw();
      const served = await list();
      expect(served.status, served.text).to.equal(200);
      // on a new connection: each one left with a statement or a handshake unanswered was dropped, not lent again
      expect(proxy.opened).to.be.greaterThan(1);
      await eventually(async () => (proxy.open === 1 ? true : undefined), 'the connections left unanswered closed');
    } finally {
      await web.close();
      await proxy.close();
    }
  });
});

/**
 * A TCP proxy to PostgreSQL that can stop passing bytes either way, as a frozen host or a partition would: nothing is
 * refused or closed, nothing is answered.
 */
async function startFreezableProxy(target: URL) {
  let frozen = false;
  let opened = 0;
  const sockets = new Set<net.Socket>();
  const clients = new WeakSet<net.Socket>();
  const server = net.createServer((client) => {
    opened += 1;
    clients.add(client);
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.on('error', () => undefined);
      from.on('data', (chunk) => frozen || to.write(chunk));
      from.once('close', () => {
        sockets.delete(from);
        to.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    databaseUrl: url.toString(),
    /** Connections made through the proxy, ever. */
    get opened() {
      return opened;
    },
    /** Connections through the proxy still open. */
    get open() {
      return [...sockets].filter((socket) => clients.has(socket)).length;
    },
    freeze: () => void (frozen = true),
    thaw: () => void (frozen = false),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
