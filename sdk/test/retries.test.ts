import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import type { Config } from '../../shared/config';
import { startApp, type TestApp } from '../../test/helpers/app';
import { createKey, createOrg } from '../../test/helpers/factories';
import { configWith } from '../../test/helpers/services';
import { startTestWorkers, useStack } from '../../test/helpers/workers';
import { jobStore } from '../../shared/registration/service';
import { createClient, RegistrationError, WorksApiError, type RegistrationQuote } from '../src';
import { cuttingProxy } from './proxy';
import { sineWav } from './audio';

const metadata = {
  network: 'testnet' as const,
  title: 'Retried',
  filename: 'retried.wav',
  creators: [{ full_name: 'Ada Lovelace', roles: { composer: true } }],
};

/** A fetch that records each answer's status (and lets a test act on it) before the client reads it. */
function recordingFetch(onResponse: (response: Response) => void = () => undefined) {
  const statuses: number[] = [];
  const fetchImpl: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    statuses.push(response.status);
    onResponse(response);
    return response;
  };
  return { fetch: fetchImpl, statuses };
}

describe('@works-api/client: retries done right (docs/api.md#errors, docs/api.md#idempotency, docs/api.md#rate-limits)', function () {
  this.timeout(120_000);

  describe('through a proxy that drops a connection after the server answered', () => {
    const stack = useStack({ queues: ['prepare', 'chain'] });

    it('a retried init carries the same Idempotency-Key and creates one job', async () => {
      const org = await createOrg(stack.app.context);
      const key = await createKey(stack.app.context, org);
      const proxy = await cuttingProxy(stack.app.url);
      try {
        const client = createClient({ baseUrl: proxy.url, token: key.token, retry: { baseDelayMs: 10 } });
        const job = await client.works.init(metadata);

        expect(proxy.seen).to.have.length(2);
        const [first, second] = proxy.seen;
        expect(first!.header('idempotency-key')).to.match(/^[0-9a-f-]{36}$/);
        expect(second!.header('idempotency-key')).to.equal(first!.header('idempotency-key'));
        // the server answered the first attempt, which the client never saw; the retry got that answer again
        const cutAnswer = await first!.answer;
        expect(cutAnswer).to.match(/^HTTP\/1\.1 200/);
        expect(JSON.parse(cutAnswer.slice(cutAnswer.indexOf('\r\n\r\n') + 4)).job_id).to.equal(job.job_id);
        const jobs = await stack.app.context.redis.keys(jobStore(stack.app.context).key(org, '*'));
        expect(jobs).to.deep.equal([jobStore(stack.app.context).key(org, job.job_id)]);
      } finally {
        await proxy.close();
      }
    });

    it('a confirm whose connection dropped is not sent again: network.outcome_unknown is thrown, requestSent', async () => {
      const key = await createKey(stack.app.context, await createOrg(stack.app.context));
      const direct = createClient({ baseUrl: stack.app.url, token: key.token });
      const job = await direct.works.init(metadata);
      await direct.works.upload(job, sineWav(1));
      await direct.works.prepare(job);

      const proxy = await cuttingProxy(stack.app.url);
      try {
        const client = createClient({ baseUrl: proxy.url, token: key.token, retry: { baseDelayMs: 10 } });
        const error = await client.works.confirm(job).catch((err: unknown) => err);
        expect(error)
          .to.be.instanceOf(WorksApiError)
          .and.include({ status: 0, code: 'network.outcome_unknown', attempts: 1, requestSent: true });
        expect(proxy.seen).to.have.length(1);
        // the server did confirm it: a second confirm would have hidden the transaction behind a 404
        expect(await proxy.seen[0]!.answer).to.match(/^HTTP\/1\.1 202/);
      } finally {
        await proxy.close();
      }
    });

    it('throws a RegistrationError at stage confirm with the job and quote, requestSent, once; the job is confirmed', async () => {
      const key = await createKey(stack.app.context, await createOrg(stack.app.context));
      const proxy = await cuttingProxy(stack.app.url, (head) => head.startsWith('POST /v1/works/confirm '));
      try {
        const client = createClient({ baseUrl: proxy.url, token: key.token, retry: { baseDelayMs: 10 } });
        const error = await client.works.register(metadata, sineWav(1)).catch((err: unknown) => err);
        expect(error).to.be.instanceOf(RegistrationError).and.instanceOf(WorksApiError);
        const failed = error as RegistrationError<RegistrationQuote>;
        expect(failed).to.include({ status: 0, code: 'network.outcome_unknown', requestSent: true, stage: 'confirm', attempts: 1 });
        expect(failed.cause).to.be.instanceOf(WorksApiError);
        const confirms = proxy.seen.filter((s) => s.head.startsWith('POST /v1/works/confirm '));
        expect(confirms).to.have.length(1);
        expect(confirms[0]!.head).to.not.equal(undefined);
        const answer = await confirms[0]!.answer;
        expect(answer).to.match(/^HTTP\/1\.1 202/);
        // the job it names is the one the server confirmed, with the quote prepare answered
        const initAnswer = await proxy.seen.find((s) => s.head.startsWith('POST /v1/works/init '))!.answer;
        expect(failed.jobId).to.equal(JSON.parse(initAnswer.slice(initAnswer.indexOf('\r\n\r\n') + 4)).job_id);
        expect(failed.quote?.is_valid).to.equal(true);
        // confirming again is what the error warns against: the job is no longer prepared
        const again = await createClient({ baseUrl: stack.app.url, token: key.token })
          .works.confirm(failed.jobId!)
          .catch((err: unknown) => err);
        expect(again).to.be.instanceOf(WorksApiError).and.include({ status: 404, code: 'registration.prepared_not_found' });
      } finally {
        await proxy.close();
      }
    });

    it('an init that fails carries its Idempotency-Key, stage init and no job', async () => {
      const key = await createKey(stack.app.context, await createOrg(stack.app.context));
      const proxy = await cuttingProxy(stack.app.url, (head) => head.startsWith('POST /v1/works/init '));
      try {
        // one attempt: the dropped init is not retried, so its outcome is unknown
        const client = createClient({ baseUrl: proxy.url, token: key.token, retry: false });
        const error = await client.works.register(metadata, sineWav(1)).catch((err: unknown) => err);
        expect(error).to.be.instanceOf(RegistrationError).and.include({ code: 'network.outcome_unknown', stage: 'init', jobId: undefined });
        const sentKey = proxy.seen[0]!.header('idempotency-key');
        expect(sentKey).to.match(/^[0-9a-f-]{36}$/);
        expect((error as RegistrationError).idempotencyKey).to.equal(sentKey);
        // reusing it is the application-level retry: the same job comes back
        const cutAnswer = await proxy.seen[0]!.answer;
        const job = await createClient({ baseUrl: stack.app.url, token: key.token }).works.init(metadata, {
          idempotencyKey: (error as RegistrationError).idempotencyKey,
        });
        expect(job.job_id).to.equal(JSON.parse(cutAnswer.slice(cutAnswer.indexOf('\r\n\r\n') + 4)).job_id);
      } finally {
        await proxy.close();
      }
    });
  });

  describe('the organization rate limit', () => {
    let app: TestApp;
    before(async () => (app = await startApp(configWith({ RATE_LIMIT_BURST: '1', RATE_LIMIT_PER_SECOND: '1' }))));
    after(() => app.close());

    it('waits out a 429 for its Retry-After, then succeeds', async () => {
      const key = await createKey(app.context, await createOrg(app.context));
      const recorded = recordingFetch();
      const client = createClient({ baseUrl: app.url, token: key.token, fetch: recorded.fetch, retry: { baseDelayMs: 10 } });
      await client.works.init(metadata);
      const started = Date.now();
      const second = await client.works.init(metadata);
      expect(second.job_id).to.be.a('string');
      expect(recorded.statuses).to.deep.equal([200, 429, 200]);
      // Retry-After said 1 s: the client waited that long before the attempt that succeeded
      expect(Date.now() - started).to.be.at.least(900);
    });

    it('without retries, throws the 429 as a typed error with its code, request_id and Retry-After', async () => {
      const key = await createKey(app.context, await createOrg(app.context));
      const client = createClient({ baseUrl: app.url, token: key.token, retry: false });
      await client.works.init(metadata);
      const error = (await client.works.init(metadata).catch((err: unknown) => err)) as WorksApiError;
      expect(error).to.be.instanceOf(WorksApiError).and.include({ status: 429, code: 'organization.rate_limited', attempts: 1 });
      expect(error.requestId).to.be.a('string').that.is.not.empty;
      expect(error.retryAfterMs).to.be.within(1000, 2000);
    });
  });

  describe('a dependency that is down for a while', () => {
    // a queue prefix of its own: no other test's workers take this prepare; a short prepare timeout answers 503
    let config: Config;
    let app: TestApp;
    before(async () => {
      config = configWith({ REDIS_PREFIX: `sdk503_${randomBytes(4).toString('hex')}`, PREPARE_TIMEOUT_MS: '1000' });
      app = await startApp(config);
    });
    after(() => app.close());

    it('retries a 503 (prepare with no worker yet) until the service answers', async () => {
      const key = await createKey(app.context, await createOrg(app.context));
      let workers: Promise<{ stop(): Promise<void> }> | undefined;
      // the workers start only once the client has seen the 503
      const recorded = recordingFetch((response) => {
        if (response.status === 503) workers ??= startTestWorkers(config, ['prepare']);
      });
      const client = createClient({ baseUrl: app.url, token: key.token, fetch: recorded.fetch, retry: { baseDelayMs: 10 } });
      try {
        const job = await client.works.init(metadata);
        await client.works.upload(job, sineWav(1));
        const quote = await client.works.prepare(job);
        expect(quote).to.include({ job_id: job.job_id, is_valid: true });
        expect(recorded.statuses.slice(2, 3)).to.deep.equal([503]);
        expect(recorded.statuses.at(-1)).to.equal(200);
      } finally {
        await (await workers)?.stop();
      }
    });
  });
});
