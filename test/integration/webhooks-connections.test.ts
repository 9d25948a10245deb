import http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { expect } from 'chai';
import nock from 'nock';
import type { TestApp } from '../helpers/app';
import type { Resources } from '../../shared/resources';
import { useStack } from '../helpers/workers';
import { WebhookReceiver } from '../helpers/receiver';
import { attemptRows, deliverEvent, deliveryReaches } from '../helpers/deliveries';
import { attemptDelivery, type AttemptDeps, type Decision } from '../../shared/webhooks/delivery';
import { DeliveryConnections } from '../../shared/webhooks/connections';
import { DeliveryRepo } from '../../shared/webhooks/repo';
import type { Resolver } from '../../shared/webhooks/destination';

/**
 * nock, loaded for the identity provider's JWKS, routes every HTTP request of this process through sockets of
 * its own that are never kept alive: these blocks turn it off to see Node's own connections.
 */
function withNodeHttp(): void {
  before(() => nock.restore());
  after(() => nock.activate());
}

/**
 * Kept-alive connections (shared/webhooks/connections.ts), attempt by attempt as a delivery job makes them,
 * against real local receivers. No worker runs the queue here: each test drives attemptDelivery itself, with a
 * resolver of its own where DNS answers matter.
 */
describe('webhook delivery: kept-alive connections', function () {
  this.timeout(60_000);
  withNodeHttp();
  const stack = useStack({ env: { REDIS_PREFIX: `webhooks_ka_${Date.now()}`, WEBHOOK_TIMEOUT_MS: '3000' }, queues: [] });
  let app: TestApp;
  let repo: DeliveryRepo;
  let connections: DeliveryConnections;
  const receivers: WebhookReceiver[] = [];
  const receiver = async (host = '127.0.0.1', port = 0) => {
    const started = await new WebhookReceiver().start(host, port);
    receivers.push(started);
    return started;
  };
  before(() => {
    ({ app } = stack);
    repo = new DeliveryRepo(app.context.db);
  });
  beforeEach(() => (connections = new DeliveryConnections({ keepAliveMs: 4000 })));
  afterEach(async () => {
    connections.destroy();
    await Promise.all(receivers.splice(0).map((r) => r.stop()));
  });

  /** Makes the first attempt of a recorded delivery, as its job would. */
  async function attemptOf(
    deliveryId: string,
    deps: Partial<AttemptDeps> = {},
    context: Resources = app.context,
  ): Promise<Decision & { deliveryId: string }> {
    const delivery = await repo.load(deliveryId);
    const decision = await attemptDelivery(context, delivery!, { retryIndex: 0, final: false }, { repo, connections, ...deps });
    return { ...decision, deliveryId };
  }

  /** Records a delivery to `url` and makes its first attempt. */
  const attempt = async (url: string, deps: Partial<AttemptDeps> = {}, context: Resources = app.context) =>
    attemptOf((await deliverEvent(app.context, url)).deliveryId, deps, context);

  /** Records `count` deliveries to `url` first, then attempts them one after another with nothing in between. */
  async function attemptInTurn(url: string, count: number): Promise<(Decision & { deliveryId: string })[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push((await deliverEvent(app.context, url)).deliveryId);
    const decisions = [];
    for (const id of ids) decisions.push(await attemptOf(id));
    return decisions;
  }

  /** A resolver answering `answers.current` for every host: a test changes it to play a DNS change. */
  const switchable = (address: string) => {
    const answers = { current: address };
    const resolve: Resolver = async () => [{ address: answers.current, family: 4 }];
    return { answers, resolve };
  };

  it('sends consecutive deliveries to the same vetted address over one connection', async () => {
    const r = await receiver();
    expect((await attemptInTurn(r.url, 3)).map((d) => d.kind)).to.deep.equal(['delivered', 'delivered', 'delivered']);
    expect(r.received).to.have.length(3);
    expect(new Set(r.received.map((h) => h.connection.remotePort)).size, 'connections used').to.equal(1);
  });

  it('opens a fresh connection per delivery when WEBHOOK_KEEP_ALIVE_MS is 0', async () => {
    const r = await receiver();
    connections = new DeliveryConnections({ keepAliveMs: 0 });
    expect((await attemptInTurn(r.url, 3)).map((d) => d.kind)).to.deep.equal(['delivered', 'delivered', 'delivered']);
    expect(new Set(r.received.map((h) => h.connection.remotePort)).size, 'connections used').to.equal(3);
  });

  it('never reuses a connection once the host resolves to another address: it connects to the new, vetted one', async () => {
    const first = await receiver('127.0.0.1');
    const port = Number(new URL(first.url).port);
    const second = await receiver('127.0.0.2', port);
    const dns = switchable('127.0.0.1');
    const url = `http://hooks.test:${port}/hooks`;

    await attempt(url, { resolve: dns.resolve });
    await attempt(url, { resolve: dns.resolve });
    dns.answers.current = '127.0.0.2'; // the name now points elsewhere, while a connection to the old address idles
    await attempt(url, { resolve: dns.resolve });
    await attempt(url, { resolve: dns.resolve });

    expect(first.received.map((h) => h.connection.localAddress)).to.deep.equal(['127.0.0.1', '127.0.0.1']);
    expect(second.received.map((h) => h.connection.localAddress)).to.deep.equal(['127.0.0.2', '127.0.0.2']);
    expect(new Set(first.received.map((h) => h.connection.remotePort)).size).to.equal(1);
    expect(new Set(second.received.map((h) => h.connection.remotePort)).size).to.equal(1);
    for (const hook of [...first.received, ...second.received]) expect(hook.headers.host).to.equal(`hooks.test:${port}`);
  });

  it('vets every delivery before any kept-alive connection is used: a name rebound to a forbidden address is refused', async () => {
    const r = await receiver();
    const port = Number(new URL(r.url).port);
    const dns = switchable('127.0.0.1');
    const url = `http://hooks.test:${port}/hooks`;
    expect((await attempt(url, { resolve: dns.resolve })).kind).to.equal('delivered');

    // the same name, now answering the metadata address, under the production policy (no private addresses)
    dns.answers.current = '169.254.169.254';
    const strict = { ...app.context, config: { ...app.context.config, webhooks: { ...app.context.config.webhooks, allowPrivate: false } } };
    const refused = await attempt(url, { resolve: dns.resolve }, strict);
    expect(refused.kind).to.equal('dead');
    expect((await attemptRows(app.context, refused.deliveryId))[0]).to.include({ outcome: 'dead', status_code: null });
    expect((await attemptRows(app.context, refused.deliveryId))[0].error).to.match(/resolves to 169\.254\.169\.254, a link-local address/);
    expect(r.received, 'nothing sent over the open connection').to.have.length(1);
  });

  it('sends again over a fresh connection, as the same attempt, when the receiver closed a kept-alive one', async () => {
    // answers the first request of each connection; the second finds the connection closed under it
    const seen = new WeakMap<Socket, number>();
    const requests: number[] = [];
    const server = http.createServer((req, res) => {
      const n = (seen.get(req.socket) ?? 0) + 1;
      seen.set(req.socket, n);
      requests.push(req.socket.remotePort ?? 0);
      if (n > 1) return void req.socket.destroy();
      req.resume().on('end', () => res.end('ok'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hooks`;
      expect((await attempt(url)).kind).to.equal('delivered');
      const second = await attempt(url);
      expect(second).to.include({ kind: 'delivered', attempt: 1 });
      expect((await attemptRows(app.context, second.deliveryId)).map((a) => [a.attempt, a.status_code, a.outcome])).to.deep.equal([
        [1, 200, 'delivered'],
      ]);
      expect(requests).to.have.length(3);
      expect(requests[1], 'the kept-alive connection').to.equal(requests[0]);
      expect(requests[2], 'a fresh one').to.not.equal(requests[0]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('does not send again when a fresh connection fails: that is the attempt failing', async () => {
    let requests = 0;
    const server = http.createServer((req) => {
      requests += 1;
      req.socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const failed = await attempt(`http://127.0.0.1:${(server.address() as { port: number }).port}/hooks`);
      expect(failed.kind).to.equal('retry');
      expect(requests).to.equal(1);
      expect((await attemptRows(app.context, failed.deliveryId))[0]).to.include({ outcome: 'retry', error: 'socket hang up' });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('waits for an answer slower than the idle period over a reused connection, up to the timeout', async () => {
    connections = new DeliveryConnections({ keepAliveMs: 200 });
    const r = await receiver();
    r.respond = (_req, index) => ({ status: 200, delayMs: index === 1 ? 800 : 0 });
    const [quick, slow] = await attemptInTurn(r.url, 2);
    expect(quick!.kind).to.equal('delivered');
    expect(slow!.kind).to.equal('delivered');
    expect(r.received[1]!.connection.remotePort, 'the kept-alive connection').to.equal(r.received[0]!.connection.remotePort);
    expect((await attemptRows(app.context, slow!.deliveryId))[0].duration_ms).to.be.within(750, 3000);
  });

  it('times out a hanging receiver on a reused connection, and does not reuse that connection', async () => {
    const r = await receiver();
    r.respond = (_req, index) => (index === 1 ? 'hang' : { status: 200 });
    const [, hung] = await attemptInTurn(r.url, 3);
    expect(hung!.kind).to.equal('retry');
    expect((await attemptRows(app.context, hung!.deliveryId))[0]).to.include({ error: 'no response within 3000 ms' });
    const ports = r.received.map((h) => h.connection.remotePort);
    expect(ports[1]).to.equal(ports[0]);
    expect(ports[2], 'a new connection after the timeout').to.not.equal(ports[1]);
  });
});

describe('webhook delivery: batched statements under concurrency', function () {
  this.timeout(60_000);
  const stack = useStack({
    env: { REDIS_PREFIX: `webhooks_batch_${Date.now()}`, WEBHOOK_RETRY_SCHEDULE: '1', WEBHOOK_CONCURRENCY: '16' },
    queues: ['webhooks'],
  });
  let app: TestApp;
  before(() => ({ app } = stack));
  withNodeHttp();

  it('answers each load of a batch on its own: an unknown id or one that is not a UUID does not fail the others', async () => {
    const r = await new WebhookReceiver().start();
    try {
      const repo = new DeliveryRepo(app.context.db);
      const d = await deliverEvent(app.context, r.url);
      const loads = await Promise.all([
        repo.load(d.deliveryId),
        repo.load(randomUUID()),
        repo.load('not-a-uuid'),
        repo.load(d.deliveryId.toUpperCase()),
      ]);
      expect(loads.map((l) => l?.id)).to.deep.equal([d.deliveryId, undefined, undefined, d.deliveryId]);
      expect(loads[0]).to.include({ url: r.url, event: 'work_failed', status: 'pending' });
      expect(loads[0]!.sealedWebhookSecret).to.be.a('string');
    } finally {
      await r.stop();
    }
  });

  it('records every attempt of many concurrent deliveries, each with its own number, over kept-alive connections', async () => {
    const r = await new WebhookReceiver().start();
    try {
      // each delivery's first request fails (retried after 1 s), its second succeeds
      const seen = new Set<string>();
      r.respond = (req) => {
        const id = String(req.headers['x-service-delivery']);
        if (seen.has(id)) return { status: 200 };
        seen.add(id);
        return { status: 503 };
      };
      const deliveries = await Promise.all(Array.from({ length: 40 }, () => deliverEvent(app.context, r.url)));
      for (const d of deliveries) {
        const row = await deliveryReaches(app.context, d.deliveryId, 'delivered');
        expect(row).to.include({ attempts: 2, last_status_code: 200 });
        const attempts = await attemptRows(app.context, d.deliveryId);
        expect(attempts.map((a) => [a.attempt, a.status_code, a.outcome])).to.deep.equal([
          [1, 503, 'retry'],
          [2, 200, 'delivered'],
        ]);
      }
      expect(r.received).to.have.length(80);
      // at most WEBHOOK_CONCURRENCY connections at once; retries a second later mostly find one idle
      expect(new Set(r.received.map((h) => h.connection.remotePort)).size, 'connections used').to.be.below(80);
    } finally {
      await r.stop();
    }
  });
});
