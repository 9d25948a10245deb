import { expect } from 'chai';
import http from 'node:http';
import path from 'node:path';
import { startApp, type TestApp } from '../helpers/app';
import { configWith, testServices } from '../helpers/services';
import { startTestWorkers } from '../helpers/workers';
import { ensureDevIdpKey } from '../../shared/dev/identity-provider';
import { createWebApp } from '../../web/app';
import { runExample } from '../helpers/dev-runner';

/** `npm run example`, with the run's settings so its operator CLI reaches our database. */
function example(args: string[], env: Record<string, string | undefined> = testServices().env) {
  // the CLI reads .data/dev.env only for what the environment lacks: the harness's settings win
  return runExample(args, { env: { ...process.env, ...env, WORKS_API_URL: 'http://127.0.0.1:1' } });
}

/** A local port where nothing listens: bound, then released. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

describe('npm run example', function () {
  this.timeout(60_000);

  it('refuses an unknown flag with its usage and exit code 2', async () => {
    const run = await example(['--bogus']);
    expect(run.code, run.stderr).to.equal(2);
    expect(run.stderr).to.include("Unknown option '--bogus'").and.include('usage: npm run example -- [--base-url URL]');
    expect(run.stdout).to.equal('');
  });

  it('reports a --base-url where nothing listens as one clear line, exit code 1', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const run = await example(['--base-url', url]);
    expect(run.code, run.stderr).to.equal(1);
    expect(run.stdout).to.equal(`works-api example against ${url}\n`);
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines).to.have.length(1);
    expect(lines[0]).to.equal(
      `example failed: the service at ${url} is not ready (ECONNREFUSED): start it with \`npm run dev\`, or pass --base-url`,
    );
  });

  describe('against a running service', () => {
    let app: TestApp;
    before(async () => (app = await startApp()));
    after(() => app.close());

    it('goes to the --base-url given, over WORKS_API_URL, and creates its organization there', async () => {
      // a trailing slash is accepted as typed
      const run = await example(['--base-url', `${app.url}/`]);
      expect(run.stdout).to.include(`works-api example against ${app.url}\n`);
      const created = /organization ([0-9a-f-]{36}), testnet wallet/.exec(run.stdout);
      expect(created, run.stdout + run.stderr).to.not.equal(null);
      // the organization is in this run's database: the CLI was given the harness's settings
      expect(await app.context.db('organizations').where({ id: created![1] }).first()).to.not.equal(undefined);
    });
  });

  describe('when the chain refuses the registration', () => {
    let app: TestApp;
    let jwks: http.Server;
    let env: Record<string, string | undefined>;
    const stops: (() => Promise<void>)[] = [];
    before(async () => {
      // development shape, as in the CLI's test: the example mints its admin token with the CLI's dev identity
      // provider, whose JWKS a web app serves; the chain worker's relayer has no funds (registration-guarantees)
      jwks = http.createServer();
      await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
      const idp = `http://127.0.0.1:${(jwks.address() as { port: number }).port}/dev/idp`;
      const keyFile = path.join(testServices().dataDir, 'example-idp.json');
      await ensureDevIdpKey(keyFile);
      env = {
        ...testServices().env,
        REDIS_PREFIX: `${testServices().env.REDIS_PREFIX}_example`,
        DEV_IDP_KEY_FILE: keyFile,
        OIDC_ISSUER: idp,
        OIDC_JWKS_URL: `${idp}/jwks.json`,
        NODE_ENV: 'development',
      };
      app = await startApp(configWith(env));
      jwks.on('request', createWebApp(app.context).callback());
      const preparer = await startTestWorkers(configWith(env), ['prepare']);
      const chain = await startTestWorkers(configWith({ ...env, RELAYER_SEED_TESTNET: '//NobodyFundedThis', CHAIN_GIVE_UP_AFTER: '4' }), [
        'chain',
      ]);
      stops.push(
        () => preparer.stop(),
        () => chain.stop(),
      );
    });
    after(async () => {
      for (const stop of stops) await stop();
      jwks.close();
      await app.close();
    });

    it('prints one line with the reason and the transaction, exit code 1, and goes no further', async () => {
      const run = await example(['--base-url', app.url], env);
      expect(run.code, run.stdout + run.stderr).to.equal(1);
      const tx = /confirmed: transaction ([0-9a-f-]{36})/.exec(run.stdout)![1];
      expect(run.stdout).to.include('transaction failed\n').and.not.include('4. Wait for the signed webhook');
      const lines = run.stderr.trimEnd().split('\n');
      expect(lines, run.stderr).to.have.length(1);
      expect(lines[0]).to.match(new RegExp(`^registration failed: chain\\.submission_rejected: \\S.* \\(transaction ${tx}\\)$`));
    });
  });
});
