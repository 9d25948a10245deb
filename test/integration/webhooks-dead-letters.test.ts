import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { call, eventually, expectError, jobReaches, startApp, type TestApp } from '../helpers/app';
import { useStack } from '../helpers/workers';
import { WebhookReceiver, verifySignature } from '../helpers/receiver';
import { attemptRows, deliverEvent, deliveryReaches, recordDelivery } from '../helpers/deliveries';
import { deliveryJobOptions, enqueueDelivery } from '../../shared/queue/jobs';
import { adminToken, operatorToken } from '../helpers/identity';
import { createOrg, issuedSecrets } from '../helpers/factories';
import { configWith } from '../helpers/services';
import { QUEUE_NAMES } from '../../shared/config';

const BOARD = '/admin/queues';
const OPERATOR = { user: 'ops', password: randomBytes(18).toString('base64url') };
const basic = (user: string, password: string) => ({ Authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });

describe('dead letters and Bull Board', function () {
  this.timeout(60_000);
  const stack = useStack({
    env: {
      REDIS_PREFIX: `deadletters_${Date.now()}`,
      WEBHOOK_RETRY_SCHEDULE: '1,1,1',
      OPERATOR_CREDENTIAL: `${OPERATOR.user}:${OPERATOR.password}`,
    },
    queues: ['webhooks', 'webhooks-dead'],
  });
  let app: TestApp;
  let receiver: WebhookReceiver;
  before(async () => {
    ({ app } = stack);
    issuedSecrets.add(OPERATOR.password);
    receiver = await new WebhookReceiver().start();
    // each delivery is refused with 400 the first time (permanent: dead at once), accepted afterwards
    receiver.respond = (req) => ({
      status:
        receiver.received.filter((r) => r.headers['x-service-delivery'] === req.headers['x-service-delivery']).length === 1 ? 400 : 200,
    });
  });
  after(() => receiver.stop());

  /** A delivery refused once with 400, dead and parked in the dead-letter queue. */
  async function deadDelivery(url: string) {
    const d = await deliverEvent(app.context, url);
    await deliveryReaches(app.context, d.deliveryId, 'dead');
    await parked(d.deliveryId);
    return d;
  }

  // failed and marked parked, read after both: a job read before its state moved may predate the mark
  const parked = (deliveryId: string) =>
    eventually(async () => {
      const queue = app.context.queues['webhooks-dead'];
      if ((await queue.getJobState(deliveryId)) !== 'failed') return undefined;
      const job = await queue.getJob(deliveryId);
      return job?.data.parked ? job : undefined;
    }, 'the dead letter to be parked');

  const boardJob = async (queue: string, status: string, id: string) => {
    const listed = await call(app.url, 'GET', `${BOARD}/api/queues?activeQueue=${queue}&status=${status}&page=1&jobsPerPage=50`, {
      headers: basic(OPERATOR.user, OPERATOR.password),
    });
    return listed.body.queues.find((q: { name: string }) => q.name === queue).jobs.find((j: { id: string }) => j.id === id);
  };

  it('answers 401 in the error envelope without credentials or with wrong ones', async () => {
    for (const path of [BOARD, `${BOARD}/`, `${BOARD}/api/queues`, `${BOARD}/static/css/x.css`]) {
      const reply = await call(app.url, 'GET', path);
      expectError(reply, 401, 'auth.unauthorized');
      expect(reply.headers.get('www-authenticate')).to.match(/^Basic realm=/);
    }
    expectError(await call(app.url, 'PUT', `${BOARD}/api/queues/webhooks-dead/x/retry`), 401, 'auth.unauthorized');
    expectError(await call(app.url, 'GET', `${BOARD}/api/queues`, { headers: basic(OPERATOR.user, 'wrong') }), 401, 'auth.unauthorized');
    expectError(
      await call(app.url, 'GET', `${BOARD}/api/queues`, { headers: basic('someone', OPERATOR.password) }),
      401,
      'auth.unauthorized',
    );
    expectError(await call(app.url, 'GET', `${BOARD}/api/queues`, { token: 'not-a-jwt' }), 401, 'auth.unauthorized');
    const org = await createOrg(app.context);
    expectError(
      await call(app.url, 'GET', `${BOARD}/api/queues`, { token: await adminToken({ organizationId: org, roles: ['viewer'] }) }),
      403,
      'common.forbidden',
    );
    // an organization's admin is not an operator: it would see and retry every organization's jobs
    expectError(
      await call(app.url, 'GET', `${BOARD}/api/queues`, { token: await adminToken({ organizationId: org }) }),
      403,
      'common.forbidden',
    );
    expectError(
      await call(app.url, 'PUT', `${BOARD}/api/queues/webhooks-dead/x/retry`, { token: await adminToken({ organizationId: org }) }),
      403,
      'common.forbidden',
    );
  });

  it('opens to an operator-role token or the operator credential and shows every queue', async () => {
    const org = await createOrg(app.context);
    for (const auth of [{ token: await operatorToken({ organizationId: org }) }, { headers: basic(OPERATOR.user, OPERATOR.password) }]) {
      const reply = await call(app.url, 'GET', `${BOARD}/api/queues`, auth);
      expect(reply.status, reply.text).to.equal(200);
      expect(reply.body.queues.map((q: { name: string }) => q.name)).to.have.members([...QUEUE_NAMES]);
    }
    const page = await call(app.url, 'GET', BOARD, { headers: basic(OPERATOR.user, OPERATOR.password) });
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.match(/^text\/html/);
    expect(page.text).to.include(`<base href="${BOARD}/"`);
    expect(page.headers.get('content-security-policy')).to.include("script-src 'self'").and.include("frame-ancestors 'none'");
    const script = /src="(static\/js\/main\.[^"]+\.js)"/.exec(page.text)![1];
    const asset = await call(app.url, 'GET', `${BOARD}/${script}`, { headers: basic(OPERATOR.user, OPERATOR.password) });
    expect(asset.status).to.equal(200);
  });

  it('serves a board page that loads nothing from another origin and still renders its app root', async () => {
    const page = await call(app.url, 'GET', BOARD, { headers: basic(OPERATOR.user, OPERATOR.password) });
    expect(page.status).to.equal(200);
    // every resource the page names (script src, link href, CSS @import) is of the service's own origin
    const external = [
      ...page.text.matchAll(/\b(?:src|href)\s*=\s*["']?((?:https?:)?\/\/[^"'\s>]+)/gi),
      ...page.text.matchAll(/@import\s+(?:url\()?\s*["']?((?:https?:)?\/\/[^"')\s;]+)/gi),
    ].map((m) => m[1]);
    expect(external).to.deep.equal([]);
    expect(page.text).to.not.match(/fonts\.(googleapis|gstatic)\.com/);
    // the app still mounts: its root, its stylesheet and its scripts are there
    expect(page.text).to.include('<div id="root">');
    expect(page.text).to.match(/<link href="static\/css\/main\.[^"]+\.css" rel="stylesheet">/);
    expect(page.text).to.match(/<script defer src="static\/js\/main\.[^"]+\.js"><\/script>/);
  });

  it('with OPERATOR_ORG_IDS, opens only to the operator-role tokens of those organizations', async () => {
    const [operators, partner] = [await createOrg(app.context), await createOrg(app.context)];
    const restricted = await startApp(configWith({ OPERATOR_ORG_IDS: operators }));
    try {
      expect(
        (await call(restricted.url, 'GET', `${BOARD}/api/queues`, { token: await operatorToken({ organizationId: operators }) })).status,
      ).to.equal(200);
      expectError(
        await call(restricted.url, 'GET', `${BOARD}/api/queues`, { token: await operatorToken({ organizationId: partner }) }),
        403,
        'common.forbidden',
      );
      expectError(
        await call(restricted.url, 'GET', `${BOARD}/api/queues`, { token: await adminToken({ organizationId: operators }) }),
        403,
        'common.forbidden',
      );
    } finally {
      await restricted.close();
    }
  });

  it('labels a dead letter with what support staff search by, and with nothing of the URL but its host, nor any secret', async () => {
    // a URL with a path, a token in its query and a user part (new keys may not have one; an older key might)
    const token = `tok-${randomBytes(9).toString('base64url')}`;
    const [user, password] = [`u${randomBytes(6).toString('hex')}`, `pw-${randomBytes(9).toString('base64url')}`];
    issuedSecrets.add(token).add(password);
    const d = await recordDelivery(app.context, `${receiver.url}/private-hook-path?token=${token}`);
    const stored = new URL(`${receiver.url}/private-hook-path?token=${token}`);
    Object.assign(stored, { username: user, password });
    await app.context.db('webhook_deliveries').where({ id: d.deliveryId }).update({ url: stored.toString() });
    await enqueueDelivery(app.context.queues, app.context.config.webhooks.retrySchedule, d.deliveryId, { labels: d.labels });
    await deliveryReaches(app.context, d.deliveryId, 'dead');
    const job = await parked(d.deliveryId);

    const host = new URL(receiver.url).host;
    const labels = { organizationId: d.organizationId, transactionId: d.transactionId, event: 'work_failed', host };
    expect(job.name).to.equal(`dead-delivery work_failed org:${d.organizationId} tx:${d.transactionId} host:${host}`);
    expect(job.data).to.deep.equal({ deliveryId: d.deliveryId, parked: true, ...labels });
    // Bull Board's API shows them as they are
    const entry = await boardJob('webhooks-dead', 'failed', d.deliveryId);
    expect(entry).to.deep.include({ name: job.name, data: job.data });
    // the delivery job carries the same labels
    const deliveryJob = (await app.context.queues.webhooks.getJob(d.deliveryId))!;
    expect(deliveryJob.name).to.equal(`deliver work_failed org:${d.organizationId} tx:${d.transactionId} host:${host}`);
    expect(deliveryJob.data).to.deep.equal({ deliveryId: d.deliveryId, ...labels });

    const shown = [JSON.stringify(entry), JSON.stringify([job.name, job.data]), JSON.stringify([deliveryJob.name, deliveryJob.data])];
    for (const text of shown)
      for (const secret of [d.key.webhookSecret, token, user, password, 'private-hook-path']) expect(text).to.not.include(secret);
  });

  it('still runs the jobs older code enqueued, without labels (a rolling deploy), and labels what follows them', async () => {
    const d = await recordDelivery(app.context, `${receiver.url}?case=unlabelled`);
    const { retrySchedule } = app.context.config.webhooks;
    await app.context.queues.webhooks.add('deliver', { deliveryId: d.deliveryId }, deliveryJobOptions(retrySchedule, d.deliveryId));
    await deliveryReaches(app.context, d.deliveryId, 'dead');
    // its dead letter is labelled from the delivery's row
    expect((await parked(d.deliveryId)).data).to.deep.include(d.labels);

    // a dead letter as older code made it: its delivery id alone
    await (await app.context.queues['webhooks-dead'].getJob(d.deliveryId))!.remove();
    await app.context.queues['webhooks-dead'].add('dead-delivery', { deliveryId: d.deliveryId }, { jobId: d.deliveryId });
    const old = await parked(d.deliveryId);
    expect(old.data).to.deep.equal({ deliveryId: d.deliveryId, parked: true });
    expect(old.failedReason).to.include('HTTP 400');
    const retry = await call(app.url, 'PUT', `${BOARD}/api/queues/webhooks-dead/${d.deliveryId}/retry`, {
      headers: basic(OPERATOR.user, OPERATOR.password),
    });
    expect(retry.status, retry.text).to.equal(204);
    const row = await deliveryReaches(app.context, d.deliveryId, 'delivered');
    // the delivery job of the retry is labelled again
    const revived = (await app.context.queues.webhooks.getJob(row.current_job_id))!;
    expect(revived.data).to.deep.equal({ deliveryId: d.deliveryId, ...d.labels });
    expect(revived.name).to.equal(`deliver work_failed org:${d.organizationId} tx:${d.transactionId} host:${d.labels.host}`);
  });

  it('retries a dead letter through the Bull Board API: delivered again, signed afresh, same delivery, dead letter gone', async () => {
    const url = `${receiver.url}?case=board-dead`;
    const d = await deadDelivery(url);
    const [refused] = receiver.received.filter((r) => r.headers['x-service-delivery'] === d.deliveryId);

    // the board lists it among the dead letters' failures, with the reason it died
    const listed = await call(app.url, 'GET', `${BOARD}/api/queues?activeQueue=webhooks-dead&status=failed&page=1&jobsPerPage=50`, {
      headers: basic(OPERATOR.user, OPERATOR.password),
    });
    const dead = listed.body.queues.find((q: { name: string }) => q.name === 'webhooks-dead');
    const entry = dead.jobs.find((j: { id: string }) => j.id === d.deliveryId);
    expect(entry.failedReason).to.include('HTTP 400');

    const retriedAt = Math.floor(Date.now() / 1000);
    const retry = await call(app.url, 'PUT', `${BOARD}/api/queues/webhooks-dead/${d.deliveryId}/retry`, {
      headers: basic(OPERATOR.user, OPERATOR.password),
    });
    expect(retry.status, retry.text).to.equal(204);

    const again = await eventually(
      async () => receiver.received.filter((r) => r.headers['x-service-delivery'] === d.deliveryId)[1],
      'the redelivery',
    );
    expect(again.raw).to.equal(refused!.raw);
    expect(verifySignature(d.key.webhookSecret, again)).to.equal(true);
    expect(Number(again.headers['x-service-timestamp'])).to.be.at.least(retriedAt);
    const row = await deliveryReaches(app.context, d.deliveryId, 'delivered');
    expect(row.attempts).to.equal(2);
    expect((await attemptRows(app.context, d.deliveryId)).map((a) => [a.attempt, a.status_code, a.outcome])).to.deep.equal([
      [1, 400, 'dead'],
      [2, 200, 'delivered'],
    ]);
    await eventually(
      async () => ((await app.context.queues['webhooks-dead'].getJob(d.deliveryId)) ? undefined : true),
      'the dead letter to leave its queue',
    );
  });

  it('does the same for a retry of the failed delivery job itself', async () => {
    const url = `${receiver.url}?case=board-failed`;
    const d = await deadDelivery(url);
    const retry = await call(app.url, 'PUT', `${BOARD}/api/queues/webhooks/${d.deliveryId}/retry`, {
      token: await operatorToken({ organizationId: await createOrg(app.context) }),
    });
    expect(retry.status, retry.text).to.equal(204);

    const again = await eventually(
      async () => receiver.received.filter((r) => r.headers['x-service-delivery'] === d.deliveryId)[1],
      'the redelivery',
    );
    expect(verifySignature(d.key.webhookSecret, again)).to.equal(true);
    expect((await deliveryReaches(app.context, d.deliveryId, 'delivered')).attempts).to.equal(2);
    await eventually(
      async () => ((await app.context.queues['webhooks-dead'].getJob(d.deliveryId)) ? undefined : true),
      'the dead letter to leave its queue',
    );
    // a second retry of a job whose delivery went through sends nothing more
    const late = await call(app.url, 'PUT', `${BOARD}/api/queues/webhooks/${d.deliveryId}/retry`, {
      headers: basic(OPERATOR.user, OPERATOR.password),
    });
    expect(late.status).to.equal(204);
    const job = await jobReaches(app.context.queues.webhooks, d.deliveryId, 'completed');
    expect(job.returnvalue).to.deep.equal({ skipped: 'already delivered' });
    expect(receiver.received.filter((r) => r.headers['x-service-delivery'] === d.deliveryId)).to.have.length(2);
  });
});
