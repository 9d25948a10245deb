import { expect } from 'chai';
import { call, expectError, type TestApp } from '../helpers/app';
import { createOrg } from '../helpers/factories';
import { adminToken } from '../helpers/identity';
import { useStack } from '../helpers/workers';
import { WebhookReceiver } from '../helpers/receiver';
import { attemptRows, deliverEvent, deliveryReaches } from '../helpers/deliveries';

/** Delivers to `url` and returns the dead delivery, its attempts and whether it reached the dead letters. */
async function refused(app: TestApp, url: string) {
  const d = await deliverEvent(app.context, url);
  const row = await deliveryReaches(app.context, d.deliveryId, 'dead');
  const attempts = await attemptRows(app.context, d.deliveryId);
  const deadLetter = await app.context.queues['webhooks-dead'].getJob(d.deliveryId);
  return { row, attempts, deadLetter };
}

describe('webhook delivery: private addresses refused after DNS resolution (SSRF)', function () {
  this.timeout(60_000);
  const stack = useStack({
    env: { REDIS_PREFIX: `ssrf_${Date.now()}`, WEBHOOK_ALLOW_PRIVATE: 'false', WEBHOOK_RETRY_SCHEDULE: '1,1,1' },
    queues: ['webhooks'],
  });
  let app: TestApp;
  let receiver: WebhookReceiver;
  let port: number;
  before(async () => {
    ({ app } = stack);
    receiver = await new WebhookReceiver().start();
    port = Number(new URL(receiver.url).port);
  });
  after(() => receiver.stop());

  const cases: [string, () => string, RegExp][] = [
    ['an IP literal 127.0.0.1', () => `http://127.0.0.1:${port}/hooks`, /resolves to 127\.0\.0\.1, a loopback address/],
    [
      'a host name resolving to 127.0.0.1',
      () => `http://localhost:${port}/hooks`,
      /refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address/,
    ],
    [
      '169.254.169.254 (cloud metadata)',
      () => 'http://169.254.169.254/latest/meta-data/',
      /resolves to 169\.254\.169\.254, a link-local address/,
    ],
    ['an IPv4-mapped IPv6 loopback', () => `http://[::ffff:127.0.0.1]:${port}/hooks`, /resolves to ::ffff:7f00:1, a loopback address/],
    ['the IPv6 loopback', () => `http://[::1]:${port}/hooks`, /resolves to ::1, a loopback address/],
  ];
  for (const [name, url, reason] of cases) {
    it(`refuses ${name}: no request is sent, the delivery is dead at once`, async () => {
      const { row, attempts, deadLetter } = await refused(app, url());
      expect(row.last_error).to.match(reason).and.include('private addresses are not allowed');
      expect(attempts.map((a) => [a.attempt, a.status_code, a.outcome])).to.deep.equal([[1, null, 'dead']]);
      expect(deadLetter, 'a dead letter').to.not.equal(undefined);
      expect(receiver.received).to.have.length(0);
    });
  }

  it('refuses at key creation, with 422, a webhook URL the delivery policy would refuse', async () => {
    const org = await createOrg(app.context);
    const admin = await adminToken({ organizationId: org });
    const create = (webhook_url: string) =>
      call(app.url, 'POST', `/v1/organizations/${org}/api-keys`, {
        token: admin,
        body: { name: 'k', scopes: ['works:read'], webhook_url },
      });
    for (const url of [
      `http://127.0.0.1:${port}/hooks`,
      `http://localhost:${port}/hooks`,
      'http://169.254.169.254/latest/meta-data/',
      `http://[::ffff:0:127.0.0.1]:${port}/`,
      'http://[2001::1]/',
    ]) {
      const error = expectError(await create(url), 422, 'common.validation_failed');
      expect(error.message, url).to.match(/webhook_url is refused: .* address/);
    }
    // a public address, and a host that does not resolve yet (checked again at every attempt), are accepted
    expect((await create('https://93.184.216.34/hooks')).status).to.equal(201);
    expect((await create('https://not-yet.invalid/hooks')).status).to.equal(201);
    expect(await app.context.db('api_keys').where({ organization_id: org }).count<{ count: string }[]>('* as count')).to.deep.equal([
      { count: '2' },
    ]);
  });
});

describe('webhook delivery: https required unless ALLOW_HTTP_WEBHOOKS', function () {
  this.timeout(60_000);
  const stack = useStack({ env: { REDIS_PREFIX: `httpsonly_${Date.now()}`, ALLOW_HTTP_WEBHOOKS: 'false' }, queues: ['webhooks'] });

  it('refuses an http:// URL at delivery time (it may predate the setting)', async () => {
    const receiver = await new WebhookReceiver().start();
    try {
      const { row, deadLetter } = await refused(stack.app, receiver.url);
      expect(row.last_error).to.equal('the webhook URL must use https (ALLOW_HTTP_WEBHOOKS is off)');
      expect(deadLetter).to.not.equal(undefined);
      expect(receiver.received).to.have.length(0);
    } finally {
      await receiver.stop();
    }
  });
});
