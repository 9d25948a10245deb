import { expect } from 'chai';
import http from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { startApp, type TestApp } from '../../test/helpers/app';
import { createKey, createOrg } from '../../test/helpers/factories';
import { configWith } from '../../test/helpers/services';
import { startTestWorkers, type TestWorkers } from '../../test/helpers/workers';
import type { Config } from '../../shared/config';
import { createClient, WorksApiError } from '../src';
import { retryAfterMs } from '../src/errors';
import { MAX_ATTEMPTS, retryPolicy } from '../src/retry';

/** A local port with nothing listening: a connection to it is refused, so no request is ever sent. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('@works-api/client: edges of retries and tracking', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  it('retries even a confirm when the connection was refused (nothing reached a server), up to maxAttempts', async () => {
    const client = createClient({
      baseUrl: `http://127.0.0.1:${await closedPort()}`,
      token: 'wrk_live_x',
      retry: { maxAttempts: 3, baseDelayMs: 1 },
    });
    const error = await client.works.confirm(randomUUID()).catch((err: unknown) => err);
    expect(error).to.be.instanceOf(WorksApiError).and.include({ status: 0, code: 'network.error', attempts: 3, requestSent: false });
    expect((error as WorksApiError).message).to.include('ECONNREFUSED');
  });

  it('wait on a transaction the socket refuses falls back to REST, which throws the typed 404', async () => {
    const key = await createKey(app.context, await createOrg(app.context));
    const client = createClient({ baseUrl: app.url, token: key.token, WebSocket });
    const error = await client.transactions.wait(randomUUID()).catch((err: unknown) => err);
    expect(error).to.be.instanceOf(WorksApiError).and.include({ status: 404, code: 'common.not_found' });
  });

  it('wait stops when its signal aborts, with the signal’s reason', async () => {
    const key = await createKey(app.context, await createOrg(app.context));
    const client = createClient({ baseUrl: app.url, token: key.token });
    const reason = new Error('the partner gave up');
    const error = await client.transactions.wait(randomUUID(), { signal: AbortSignal.abort(reason) }).catch((err: unknown) => err);
    expect(error).to.equal(reason);
  });
});

describe('@works-api/client: a wait that is given up', function () {
  this.timeout(60_000);
  // a queue prefix of its own with no chain worker: a confirmed transaction stays pending
  let config: Config;
  let app: TestApp;
  let workers: TestWorkers;
  before(async () => {
    config = configWith({ REDIS_PREFIX: `sdkwait_${randomBytes(4).toString('hex')}` });
    app = await startApp(config);
    workers = await startTestWorkers(config, ['prepare']);
  });
  after(async () => {
    await workers.stop();
    await app.close();
  });

  for (const mode of ['the WebSocket', 'polling'] as const) {
    it(`over ${mode}, rejects with the signal’s reason when it aborts, having reported the pending state`, async () => {
      const key = await createKey(app.context, await createOrg(app.context));
      const client = createClient({ baseUrl: app.url, token: key.token, WebSocket: mode === 'polling' ? undefined : WebSocket });
      const { transaction_id } = await client.works.register(
        { network: 'testnet', title: 'Held', filename: 'h.wav', creators: [{ full_name: 'Ada', roles: { author: true } }] },
        randomBytes(1024),
      );
      const seen: string[] = [];
      const error = await client.transactions
        .wait(transaction_id, { onUpdate: (tx) => seen.push(tx.status), signal: AbortSignal.timeout(1000), pollIntervalMs: 50 })
        .catch((err: unknown) => err);
      expect((error as Error).name).to.equal('TimeoutError');
      expect(seen).to.deep.equal(['pending']);
    });
  }
});

describe('@works-api/client: Retry-After', () => {
  it('reads delay-seconds and an HTTP date as milliseconds, and nothing else', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs('5', now)).to.equal(5000);
    expect(retryAfterMs(' 0 ', now)).to.equal(0);
    expect(retryAfterMs('Thu, 01 Jan 2026 00:00:30 GMT', now)).to.equal(30_000);
    expect(retryAfterMs('Wed, 31 Dec 2025 23:59:00 GMT', now)).to.equal(0);
    expect(retryAfterMs('soon', now)).to.equal(undefined);
    expect(retryAfterMs(null, now)).to.equal(undefined);
  });

  it('reads junk as no Retry-After, never as a zero wait', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    for (const junk of ['1.5', '-1', '+3', '1e3', '0x10', '5 seconds', '', '   ', '2026-01-01T00:00:30Z', 'Thursday'])
      expect(retryAfterMs(junk, now), junk).to.equal(undefined);
  });
});

describe('@works-api/client: the retry policy', () => {
  it('keeps a default for an explicit undefined, field by field', () => {
    expect(retryPolicy({ maxAttempts: undefined, baseDelayMs: 7 })).to.deep.equal({
      maxAttempts: 5,
      baseDelayMs: 7,
      maxDelayMs: 10_000,
      maxRetryAfterMs: 60_000,
    });
    expect(retryPolicy(false).maxAttempts).to.equal(1);
    expect(retryPolicy(undefined).maxAttempts).to.equal(5);
    expect(retryPolicy({ maxAttempts: MAX_ATTEMPTS, baseDelayMs: 0 })).to.include({ maxAttempts: MAX_ATTEMPTS, baseDelayMs: 0 });
  });

  it('throws a RangeError for attempts that are not an integer from 1 to 20 and delays that are not finite ≥ 0', () => {
    for (const maxAttempts of [0, -1, 1.5, NaN, Infinity, MAX_ATTEMPTS + 1])
      expect(() => retryPolicy({ maxAttempts }), String(maxAttempts)).to.throw(RangeError, /maxAttempts/);
    for (const field of ['baseDelayMs', 'maxDelayMs', 'maxRetryAfterMs'] as const)
      for (const value of [NaN, Infinity, -1])
        expect(() => retryPolicy({ [field]: value }), `${field} ${value}`).to.throw(RangeError, new RegExp(field));
  });

  it('createClient throws the RangeError at once, before any request', () => {
    expect(() => createClient({ baseUrl: 'http://127.0.0.1:1', token: 'wrk_live_x', retry: { maxAttempts: Infinity } })).to.throw(
      RangeError,
    );
  });
});
