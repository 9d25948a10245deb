import { expect } from 'chai';
import { startApp, call, expectError, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { adminToken, operatorToken } from '../helpers/identity';

describe('HTTP basics', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  it('GET /healthz answers 200 with security headers and a request id', async () => {
    const reply = await call(app.url, 'GET', '/healthz');
    expect(reply.status).to.equal(200);
    expect(reply.body).to.deep.equal({ status: 'ok' });
    expect(reply.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
    expect(reply.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(reply.headers.get('strict-transport-security')).to.include('max-age=');
    expect(reply.headers.get('x-frame-options')).to.equal('DENY');
    expect(reply.headers.get('content-security-policy')).to.include("default-src 'none'");
  });

  it('reuses a safe incoming X-Request-Id and replaces an unsafe one', async () => {
    const kept = await call(app.url, 'GET', '/nope', { headers: { 'X-Request-Id': 'partner-req.42' } });
    expect(kept.headers.get('x-request-id')).to.equal('partner-req.42');
    expect(expectError(kept, 404, 'common.not_found').request_id).to.equal('partner-req.42');
    const replaced = await call(app.url, 'GET', '/healthz', { headers: { 'X-Request-Id': 'a b<script>' } });
    expect(replaced.headers.get('x-request-id')).to.not.equal('a b<script>');
    const long = await call(app.url, 'GET', '/healthz', { headers: { 'X-Request-Id': 'x'.repeat(129) } });
    expect(long.headers.get('x-request-id')).to.have.length(36);
  });

  it('answers an unknown route with 404 in the envelope', async () => {
    expectError(await call(app.url, 'GET', '/v1/nothing-here'), 404, 'common.not_found');
  });

  it('answers a known route with the wrong method with 405 in the envelope', async () => {
    const reply = await call(app.url, 'DELETE', '/v1/works/init');
    expectError(reply, 405, 'common.method_not_allowed');
    expect(reply.headers.get('allow')).to.include('POST');
  });

  it('answers malformed JSON with 400 common.bad_request', async () => {
    const { token } = await createKey(app.context, await createOrg(app.context));
    const reply = await call(app.url, 'POST', '/v1/sessions', {
      token,
      raw: '{"external_user_ref": ',
      headers: { 'Content-Type': 'application/json' },
    });
    expectError(reply, 400, 'common.bad_request');
  });

  it('refuses a JSON body over 1 MB with 413', async () => {
    const { token } = await createKey(app.context, await createOrg(app.context));
    const raw = JSON.stringify({ external_user_ref: 'x'.repeat(1024 * 1024 + 10) });
    expectError(
      await call(app.url, 'POST', '/v1/sessions', { token, raw, headers: { 'Content-Type': 'application/json' } }),
      413,
      'common.payload_too_large',
    );
  });

  it('answers headers over the size limit with 431 in the envelope', async () => {
    const reply = await call(app.url, 'GET', '/healthz', { headers: { 'X-Padding': 'p'.repeat(20_000) } });
    const error = expectError(reply, 431, 'common.headers_too_large');
    expect(error.request_id).to.match(/^[0-9a-f-]{36}$/);
  });

  it('refuses a body that is not JSON with 415', async () => {
    const { token } = await createKey(app.context, await createOrg(app.context));
    expectError(
      await call(app.url, 'POST', '/v1/sessions', {
        token,
        raw: 'external_user_ref=x',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      }),
      415,
      'common.unsupported_media_type',
    );
  });

  it('takes a JSON body whatever the spelling of its media type, and only a JSON one', async () => {
    const { token } = await createKey(app.context, await createOrg(app.context));
    const body = (type: string) =>
      call(app.url, 'POST', '/v1/sessions', { token, raw: '{"external_user_ref":"u-1"}', headers: { 'Content-Type': type } });
    for (const type of ['application/json', 'application/json; charset=utf-8', 'Application/JSON']) {
      const reply = await body(type);
      expect(reply.status, `${type}: ${reply.text}`).to.equal(201);
    }
    for (const type of ['text/plain', 'application/jsonx', 'application/json-seq'])
      expectError(await body(type), 415, 'common.unsupported_media_type');
  });

  it('GET /readyz reports every dependency, the chain through @polkadot/api', async () => {
    const reply = await call(app.url, 'GET', '/readyz');
    expect(reply.status, reply.text).to.equal(200);
    expect(reply.body.status).to.equal('ready');
    expect(Object.keys(reply.body.checks)).to.have.members(['postgres', 'redis', 's3', 'chain:testnet']);
    expect(reply.body.checks['chain:testnet'].detail.runtime).to.equal('statemine');
    expect(reply.body.checks['chain:testnet'].detail.best_block).to.be.a('number');
  });

  it('GET /metrics exposes HTTP durations and queue depths, to operators only', async () => {
    await call(app.url, 'GET', '/healthz');
    expectError(await call(app.url, 'GET', '/metrics'), 401, 'auth.unauthorized');
    const org = await createOrg(app.context);
    expectError(await call(app.url, 'GET', '/metrics', { token: await adminToken({ organizationId: org }) }), 403, 'common.forbidden');
    const reply = await call(app.url, 'GET', '/metrics', { token: await operatorToken({ organizationId: org }) });
    expect(reply.status).to.equal(200);
    expect(reply.text).to.match(/^works_api_http_request_duration_seconds_count\{method="GET",route="\/healthz",status="200"\} \d+$/m);
    for (const queue of ['prepare', 'chain', 'webhooks'])
      expect(reply.text).to.match(new RegExp(`^works_api_queue_jobs\\{queue="${queue}",state="waiting"\\} \\d+$`, 'm'));
  });
});
