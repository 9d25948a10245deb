import net from 'node:net';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { startApp, call, eventually, expectError, testLogger, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { useStack } from '../helpers/workers';
import { quote } from '../helpers/registration';
import { configWith, testServices } from '../helpers/services';
import { openResources } from '../../shared/resources';
import { createDb } from '../../shared/db/knex';

/** The shortest statement timeout a web takes (shared/config.ts), which these tests wait out. */
const BOUND_MS = 3000;

/**
 * A web process's PostgreSQL statements end (shared/db/knex.ts `createDb`): past WEB_STATEMENT_TIMEOUT_MS the server
 * cancels one, and 1 s later the web gives up on a server that does not answer at all. The request answers 503 in
 * the error envelope, and a connection whose statement or SQL transaction was left unanswered is never lent again.
 */
describe("the web's statement timeout", function () {
  this.timeout(120_000);
  const stack = useStack();
  let app: TestApp;
  // a web process like any other, with the shortest statement timeout it takes
  let bounded: TestApp;
  before(async () => {
    app = stack.app;
    bounded = await startApp(configWith({ WEB_STATEMENT_TIMEOUT_MS: String(BOUND_MS) }));
  });
  after(() => bounded?.close());

  const balance = async (org: string) => Number((await app.context.db('organizations').where({ id: org }).first()).credit_balance);
  const setting = async (db: TestApp['context']['db']) => (await db.raw('SHOW statement_timeout')).rows[0].statement_timeout as string;

  /**
   * A web with the shortest bound and one connection (so that a stuck one lent again would fail a request after the
   * thaw), its PostgreSQL behind a proxy, and a key's listing on it, which reads PostgreSQL at each call.
   */
  const throughProxy = async (
    use: (through: { proxy: Proxy; key: { id: string }; list: () => ReturnType<typeof call> }) => Promise<void>,
  ) => {
    const proxy = await startProxy(new URL(testServices().config.database.url));
    const web = await startApp(
      configWith({ DATABASE_URL: proxy.databaseUrl, DATABASE_POOL_MAX: '1', WEB_STATEMENT_TIMEOUT_MS: String(BOUND_MS) }),
    );
    try {
      const key = await createKey(app.context, await createOrg(app.context));
      await use({ proxy, key, list: () => call(web.url, 'GET', '/v1/works', { token: key.token }) });
    } finally {
      await web.close();
      await proxy.close();
    }
  };

  it("is set on the web role's connections only: 5 s by default, the configured value, none for a worker or a tool", async () => {
    expect(await setting(app.context.db)).to.equal('5s');
    expect(await setting(bounded.context.db)).to.equal('3s');
    const config = configWith({ WEB_STATEMENT_TIMEOUT_MS: String(BOUND_MS) });
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
    const confirm = (base: string) => call(base, 'POST', '/v1/works/confirm', { token: key.token, body: { job_id: job.jobId } });

    // another session holds the organization's row (as a long credit or an operator's open psql would): the confirm's
    // insert of its transaction (a key share of that row) and its debit wait for it
    const holder = await app.context.db.transaction();
    try {
      await holder('organizations').where({ id: org }).forUpdate().first();
      // bounded only so that a failure shows as one, not as a hang: without the timeout the confirm waits for the
      // holder, which lets go here after 30 s, and then succeeds
      const letGo = setTimeout(() => void holder.rollback().catch(() => undefined), 30_000);
      const refused = await confirm(bounded.url).finally(() => clearTimeout(letGo));
      expect(holder.isCompleted(), 'answered while the lock was still held').to.equal(false);
      expectError(refused, 503, 'common.service_unavailable');
      expect(refused.headers.get('retry-after')).to.equal('5');
    } finally {
      if (!holder.isCompleted()) await holder.rollback();
    }
    // nothing was written: no transaction, no ledger entry, the balance as it was, and no statement left waiting
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

    // the job went back to its quote: the same confirm, the lock gone, is charged once (through a web with the
    // default bound, so that a loaded machine's slow statement is not taken for the lock)
    const accepted = await confirm(app.url);
    expect(accepted.status, accepted.text).to.equal(202);
    expect(await balance(org)).to.equal(1000 - price);
    const debits = await app.context.db('credit_ledger').where({ organization_id: org, kind: 'debit' }).select('amount', 'reference');
    expect(debits).to.deep.equal([{ amount: String(-price), reference: accepted.body.transaction_id }]);
    expectError(await confirm(app.url), 404, 'registration.prepared_not_found');
  });

  it('a PostgreSQL that stops answering: the request answers 503 and the pool lends that connection no more', async () => {
    await throughProxy(async ({ proxy, key, list }) => {
      // the key's first use of the minute is written in the background: done before the freeze, so that the listing's
      // own statement meets it
      expect((await list()).status).to.equal(200);
      expect((await list()).status).to.equal(200);
      await eventually(
        async () => ((await app.context.db('api_keys').where({ id: key.id }).first()).last_used_at ? true : undefined),
        'the key used',
      );
      expect(proxy.opened).to.equal(1);

      proxy.drop();
      // bounded only so that a failure shows as one, not as a hang: unbounded, the request waits for TCP to give up
      const hung = new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 30_000).unref());
      const refused = await Promise.race([list(), hung]);
      expect(refused, 'still waiting for a server that does not answer').to.not.equal('hung');
      if (refused === 'hung') return;
      expectError(refused, 503, 'common.service_unavailable');
      expect(proxy.opened, "the listing's own statement went unanswered").to.equal(1);

      proxy.pass();
      const served = await list();
      expect(served.status, served.text).to.equal(200);
      // on a new connection: the one whose statement went unanswered was dropped, not lent again
      expect(proxy.opened).to.equal(2);
      await eventually(async () => (proxy.open === 1 ? true : undefined), 'the connection left unanswered closed');
    });
  });

  it("a new connection's handshake that goes unanswered: 503, and after the thaw a connection that answers", async () => {
    await throughProxy(async ({ proxy, list }) => {
      // the web has opened no connection yet: its first is made while nothing answers
      expect(proxy.opened).to.equal(0);
      proxy.drop();
      expectError(await list(), 503, 'common.service_unavailable');
      expect(proxy.opened).to.be.greaterThan(0);
      proxy.pass();
      const served = await list();
      expect(served.status, served.text).to.equal(200);
      // every handshake left unanswered was given up and its connection closed; the one that answered serves on
      await eventually(async () => (proxy.open === 1 ? true : undefined), 'the unanswered handshakes closed');
    });
  });

  it('a SQL transaction whose ROLLBACK was given up on is never lent again, even once the late answer came', async () => {
    const proxy = await startProxy(new URL(testServices().config.database.url));
    const name = `late answer ${randomUUID()}`;
    const url = new URL(proxy.databaseUrl);
    url.searchParams.set('application_name', name);
    // a web's pool (its role's bound), with one connection
    const db = createDb({ url: url.toString(), poolMax: 1 }, undefined, BOUND_MS);
    const abandoned = () =>
      app.context
        .db('pg_stat_activity')
        .where({ application_name: name, state: 'idle in transaction' })
        .first<{ pid: number } | undefined>('pid');
    try {
      await db.raw('SELECT 1');
      // the server pauses (a frozen host that comes back): the insert's answer, and then the ROLLBACK, are not seen in time
      const failed = await db
        .transaction(async (trx) => {
          await trx.raw('SELECT 1');
          proxy.hold();
          await trx('organizations').insert({ name });
        })
        .then(
          () => 'committed',
          (err: Error) => err.message,
        );
      expect(failed).to.match(/Query read timeout$/);
      // it comes back: the insert reaches it and is answered, in a transaction nobody will end
      proxy.pass();
      const { pid } = await eventually(abandoned, 'the late answer');

      // the next SQL transaction of the pool commits only its own work
      await db.transaction((trx) => trx.raw('SELECT 1'));
      expect(await app.context.db('organizations').where({ name }).first()).to.equal(undefined);
      await eventually(async () => {
        const alive = await app.context.db('pg_stat_activity').where({ pid }).first('pid');
        return alive ? undefined : true;
      }, 'the abandoned transaction ended');
      expect(await app.context.db('organizations').where({ name }).first()).to.equal(undefined);
    } finally {
      await db.destroy();
      await proxy.close();
    }
  });
});

/**
 * A TCP proxy to PostgreSQL that passes bytes, or stops: dropping them (a host that is gone: nothing is refused or
 * closed, nothing answered, ever) or holding them until it passes again (a host that froze and comes back).
 */
type Proxy = Awaited<ReturnType<typeof startProxy>>;

async function startProxy(target: URL) {
  let mode: 'pass' | 'drop' | 'hold' = 'pass';
  const held: (() => void)[] = [];
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
      from.on('data', (chunk) => {
        if (mode === 'pass') to.write(chunk);
        else if (mode === 'hold') held.push(() => to.write(chunk));
      });
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
    drop: () => void (mode = 'drop'),
    hold: () => void (mode = 'hold'),
    pass: () => {
      mode = 'pass';
      for (const write of held.splice(0)) write();
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
