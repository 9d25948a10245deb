import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { io as ioClient, type Socket as IoSocket } from 'socket.io-client';
import type { Config } from '../../shared/config';
import { startApp, call, eventually, type TestApp } from '../helpers/app';
import { createOrg, createKey, issuedSecrets, type TestKey } from '../helpers/factories';
import { register, initBody } from '../helpers/registration';
import { connect, STEPS, wsUrl, type Frame } from '../helpers/live';
import { startTestWorkers, type TestWorkers } from '../helpers/workers';
import { configWith } from '../helpers/services';

/** An upgrade the server must refuse: its plain HTTP answer, and proof that no socket opened. */
function refused(
  app: TestApp,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any; requestId: string | undefined }> {
  const ws = new WebSocket(wsUrl(app.url, path), { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => reject(new Error('the upgrade was accepted')));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res: IncomingMessage) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode!, body: JSON.parse(text), requestId: res.headers['x-request-id'] as string | undefined }),
      );
    });
  });
}

function expectRefusal(reply: { status: number; body: any; requestId: string | undefined }, status: number, code: string): void {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(status);
  expect(reply.body.error.code).to.equal(code);
  expect(reply.body.error.message).to.be.a('string');
  expect(reply.body.error.request_id).to.equal(reply.requestId);
}

async function session(app: TestApp, key: TestKey, ref: string): Promise<string> {
  const reply = await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: ref } });
  expect(reply.status).to.equal(201);
  issuedSecrets.add(reply.body.session_token);
  return reply.body.session_token;
}

describe('live transaction tracking (docs/api.md#websocket)', function () {
  this.timeout(120_000);
  let config: Config;
  let first: TestApp; // handles init, prepare and confirm
  let second: TestApp; // only ever serves the sockets
  let workers: TestWorkers;

  before(async () => {
    // a queue prefix of its own: pausing the chain queue below touches no other test
    config = configWith({ REDIS_PREFIX: `ws_${randomBytes(4).toString('hex')}` });
    first = await startApp(config);
    second = await startApp(config);
    workers = await startTestWorkers(config, ['prepare', 'chain']);
  });
  after(async () => {
    await workers.stop();
    await second.close();
    await first.close();
  });

  /** A registration confirmed through the first app whose chain job waits until `go` is called. */
  async function confirmedButHeld(key: TestKey, body = initBody()): Promise<{ id: string; go: () => Promise<void> }> {
    await first.context.queues.chain.pause();
    try {
      const r = await register(first.url, key.token, body);
      expect(r.confirm.status).to.equal(202);
      return { id: r.confirm.body.transaction_id, go: () => first.context.queues.chain.resume() };
    } catch (err) {
      await first.context.queues.chain.resume();
      throw err;
    }
  }

  it('a ws client on a second web app receives connected, every step in order, then the close 1000', async () => {
    const key = await createKey(first.context, await createOrg(first.context));
    const tx = await confirmedButHeld(key);
    const client = await connect(second.url, `/v1/ws/transactions/${tx.id}`, key.token);
    const [connected] = await client.frameCount(1);
    expect(connected).to.deep.include({ type: 'connected' });
    expect(connected!.transaction).to.include({
      transaction_id: tx.id,
      status: 'pending',
      current_step: 'validating',
      progress: 5,
      is_complete: false,
    });

    await tx.go();
    const close = await client.closed;
    expect(close.code).to.equal(1000);
    const frames = client.frames;
    expect(frames.map((f) => f.type)).to.deep.equal(['connected', 'update', 'update', 'update', 'update', 'update']);
    expect(frames.map((f) => f.transaction.current_step)).to.deep.equal(STEPS);
    expect(frames.map((f) => f.transaction.progress)).to.deep.equal([5, 20, 40, 60, 80, 100]);
    const last = frames.at(-1)!.transaction;
    expect(last).to.include({ status: 'finalized', is_complete: true });
    expect(last.result).to.include.keys('ats_id', 'tx_hash', 'block_number', 'explorer_url');
    // the frame carries the REST body, one serializer for both
    const rest = await call(first.url, 'GET', `/v1/transactions/${tx.id}`, { token: key.token });
    expect(last).to.deep.equal(rest.body);
  });

  it('a client connecting after completion gets connected with the final state, then the close', async () => {
    const key = await createKey(first.context, await createOrg(first.context));
    const r = await register(first.url, key.token);
    const id = r.confirm.body.transaction_id;
    const follower = await connect(second.url, `/v1/ws/transactions/${id}`, key.token);
    expect((await follower.closed).code).to.equal(1000); // the transaction has ended

    const late = await connect(first.url, `/v1/ws/transactions/${id}`, key.token);
    expect((await late.closed).code).to.equal(1000);
    expect(late.frames).to.have.length(1);
    expect(late.frames[0]!.type).to.equal('connected');
    expect(late.frames[0]!.transaction).to.include({
      transaction_id: id,
      status: 'finalized',
      current_step: 'completed',
      progress: 100,
      is_complete: true,
    });
  });

  it('401 on a missing, malformed, unknown or misplaced token: a plain HTTP answer, no socket', async () => {
    const key = await createKey(first.context, await createOrg(first.context));
    const path = `/v1/ws/transactions/${randomUUID()}`;
    expectRefusal(await refused(second, path), 401, 'auth.unauthorized');
    expectRefusal(await refused(second, path, { Authorization: 'Basic dXNlcjpwYXNz' }), 401, 'auth.unauthorized');
    expectRefusal(await refused(second, path, { Authorization: `Bearer wrk_live_${'a'.repeat(40)}` }), 401, 'auth.unauthorized');
    expectRefusal(await refused(second, `${path}?access_token=wrs_not-a-jwt`), 401, 'auth.unauthorized');
    // an API key never travels in the URL, where logs would keep it
    expectRefusal(await refused(second, `${path}?access_token=${key.token}`), 401, 'auth.unauthorized');
    const withId = await refused(second, path, { 'X-Request-Id': 'ws-req-1' });
    expect(withId.requestId).to.equal('ws-req-1');
  });

  it("404 for another organization's transaction, an unknown one, or another path", async () => {
    const owner = await createKey(first.context, await createOrg(first.context));
    const stranger = await createKey(first.context, await createOrg(first.context));
    const r = await register(first.url, owner.token);
    const id = r.confirm.body.transaction_id;
    expectRefusal(
      await refused(second, `/v1/ws/transactions/${id}`, { Authorization: `Bearer ${stranger.token}` }),
      404,
      'common.not_found',
    );
    expectRefusal(
      await refused(second, `/v1/ws/transactions/${randomUUID()}`, { Authorization: `Bearer ${owner.token}` }),
      404,
      'common.not_found',
    );
    expectRefusal(
      await refused(second, `/v1/ws/transactions/not-an-id`, { Authorization: `Bearer ${owner.token}` }),
      404,
      'common.not_found',
    );
    expectRefusal(await refused(second, `/v1/ws/elsewhere`, { Authorization: `Bearer ${owner.token}` }), 404, 'common.not_found');
  });

  it("an end-user session token follows its own ref's transaction and is refused another ref's", async () => {
    const key = await createKey(first.context, await createOrg(first.context));
    const r = await register(first.url, key.token, initBody({ external_user_ref: 'listener-a' }));
    const id = r.confirm.body.transaction_id;
    const other = await session(first, key, 'listener-b');
    expectRefusal(await refused(second, `/v1/ws/transactions/${id}?access_token=${encodeURIComponent(other)}`), 404, 'common.not_found');
    expectRefusal(await refused(second, `/v1/ws/transactions/${id}`, { Authorization: `Bearer ${other}` }), 404, 'common.not_found');

    const own = await session(first, key, 'listener-a');
    const client = await connect(second.url, `/v1/ws/transactions/${id}?access_token=${encodeURIComponent(own)}`);
    const [connected] = await client.frameCount(1);
    expect(connected!.type).to.equal('connected');
    expect(connected!.transaction.transaction_id).to.equal(id);
    expect((await client.closed).code).to.equal(1000);
    expect(client.frames.at(-1)!.transaction.is_complete).to.equal(true);
  });

  it('a socket.io client on the second app subscribes and receives the same updates', async () => {
    const key = await createKey(first.context, await createOrg(first.context));
    const tx = await confirmedButHeld(key);
    // the credential goes in the HTTP handshake, checked before engine.io allocates anything
    const socket: IoSocket = ioClient(second.url, {
      path: '/v1/socket.io',
      extraHeaders: { Authorization: `Bearer ${key.token}` },
      reconnection: false,
    });
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve);
        socket.once('connect_error', reject);
      });
      const updates: Frame[] = [];
      const done = new Promise<void>((resolve) =>
        socket.on('update', (frame: Frame) => {
          updates.push(frame);
          if (frame.transaction.is_complete) resolve();
        }),
      );
      const connected: Frame = await socket.timeout(10_000).emitWithAck('subscribe', tx.id);
      expect(connected.type).to.equal('connected');
      expect(connected.transaction).to.include({ transaction_id: tx.id, current_step: 'validating' });

      await tx.go();
      await done;
      expect(updates.map((f) => f.type)).to.deep.equal(['update', 'update', 'update', 'update', 'update']);
      expect([connected, ...updates].map((f) => f.transaction.current_step)).to.deep.equal(STEPS);
      const rest = await call(first.url, 'GET', `/v1/transactions/${tx.id}`, { token: key.token });
      expect(updates.at(-1)!.transaction).to.deep.equal(rest.body);

      // another organization's transaction: an error frame, no subscription
      const stranger = await createKey(first.context, await createOrg(first.context));
      const foreign = ioClient(second.url, {
        path: '/v1/socket.io',
        extraHeaders: { Authorization: `Bearer ${stranger.token}` },
        reconnection: false,
        transports: ['websocket'],
      });
      try {
        const answer: any = await foreign.timeout(10_000).emitWithAck('subscribe', tx.id);
        expect(answer).to.deep.include({ type: 'error', transaction: null });
        expect(answer.error.code).to.equal('common.not_found');
      } finally {
        foreign.close();
      }
    } finally {
      socket.close();
    }
  });

  it('socket.io refuses a handshake without a valid credential before allocating a session', async () => {
    // the sockets of earlier tests gone first, so any session allocated here would show
    await eventually(async () => (second.live.socketIoSessions() === 0 ? true : undefined), 'earlier socket.io sessions to close');
    // anonymous, forged, and a session token where a key is expected in a query: 403 at the handshake itself
    for (const query of ['', '&access_token=wrk_live_x', `&access_token=wrs_${'x'.repeat(40)}`]) {
      const reply = await fetch(`${second.url}/v1/socket.io/?EIO=4&transport=polling${query}`);
      expect(reply.status, query).to.equal(403);
      expect((await reply.json()).message).to.match(/^auth\.unauthorized: /);
    }
    const forged = await fetch(`${second.url}/v1/socket.io/?EIO=4&transport=polling`, {
      headers: { Authorization: `Bearer wrk_live_${'b'.repeat(40)}` },
    });
    expect(forged.status).to.equal(403);
    const socket = ioClient(second.url, {
      path: '/v1/socket.io',
      extraHeaders: { Authorization: `Bearer wrk_live_${'b'.repeat(40)}` },
      reconnection: false,
      transports: ['websocket'],
    });
    try {
      const err: Error = await new Promise((resolve) => socket.once('connect_error', resolve));
      expect(err.message).to.be.a('string');
      expect(socket.connected).to.equal(false);
    } finally {
      socket.close();
    }
    expect(second.live.socketIoSessions()).to.equal(0);
  });

  describe('limits', () => {
    let limited: TestApp;
    before(async () => {
      limited = await startApp(
        configWith({
          REDIS_PREFIX: config.redis.prefix,
          WS_MAX_SOCKETS_PER_ORG: '2',
          WS_HEARTBEAT_SECONDS: '1',
          WS_IDLE_TIMEOUT_SECONDS: '2',
        }),
      );
    });
    after(() => limited.close());

    it('caps the sockets of an organization (429), frees a place when one closes, and closes idle sockets', async () => {
      const key = await createKey(first.context, await createOrg(first.context));
      const tx = await confirmedButHeld(key);
      try {
        const path = `/v1/ws/transactions/${tx.id}`;
        const a = await connect(limited.url, path, key.token);
        const b = await connect(limited.url, path, key.token);
        const over = await refused(limited, path, { Authorization: `Bearer ${key.token}` });
        expectRefusal(over, 429, 'organization.rate_limited');
        a.ws.close();
        await a.closed;
        await eventually(async () => (limited.live.connections.size === 1 ? true : undefined), 'the closed socket to give its place back');
        const c = await connect(limited.url, path, key.token);
        // nothing happens on the transaction (its job is held): both sockets go idle and are closed
        expect((await b.closed).code).to.equal(1001);
        expect((await c.closed).code).to.equal(1001);
      } finally {
        await tx.go();
      }
    });

    it('drops a client that stops answering pings', async () => {
      const key = await createKey(first.context, await createOrg(first.context));
      const tx = await confirmedButHeld(key);
      try {
        const silent = await connect(limited.url, `/v1/ws/transactions/${tx.id}`, key.token, { autoPong: false });
        const close = await silent.closed;
        expect(close.code).to.equal(1006); // terminated without a close frame: the peer counts as gone
      } finally {
        await tx.go();
      }
    });
  });
});
