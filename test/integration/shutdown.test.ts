import { expect } from 'chai';
import http from 'node:http';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { io as ioClient } from 'socket.io-client';
import nock from 'nock';
import type { Config, Env } from '../../shared/config';
import { openResources, type Resources } from '../../shared/resources';
import { testLogger, whenConnected } from '../helpers/app';
import { createKey, createOrg, type TestKey } from '../helpers/factories';
import { initBody, register, upload } from '../helpers/registration';
import { configWith, testServices } from '../helpers/services';
import { startTestWorkers, type TestWorkers } from '../helpers/workers';
import { spawnWeb, type WebProcess } from '../helpers/web-process';
import { checkResponse } from '../helpers/contract';

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: any;
  readonly socket: net.Socket;
  /** Sent over a connection kept alive from an earlier request. */
  readonly reused: boolean;
}

/**
 * One request over `agent`; the body read to its end. A ClientRequest of its own rather than `http.request`:
 * chopsticks, in this process, installs global-agent, whose `http.request` swaps the agent for one of its own
 * that does not keep connections alive (and nock is turned off below for the same reason).
 */
function send(base: string, agent: http.Agent, method: string, path: string, token?: string, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const { hostname, port } = new URL(base);
    const req = new http.ClientRequest({
      host: hostname,
      port,
      path,
      method,
      agent,
      headers: {
        ...(token ? { Authorization: `Bearer ${token}` } : {}),
        ...(payload ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) } : {}),
      },
    });
    req.once('error', reject);
    req.once('response', (res) => {
      const socket = res.socket;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.once('error', reject);
      res.once('end', () => {
        try {
          const parsed = text ? JSON.parse(text) : undefined;
          checkResponse(method, path, res.statusCode!, res.headers['content-type'] ?? null, parsed, text); // /readyz's draining answer too
          resolve({ status: res.statusCode!, headers: res.headers, body: parsed, socket, reused: req.reusedSocket });
        } catch (err) {
          reject(err as Error);
        }
      });
    });
    req.end(payload);
  });
}

/** Rejects after `ms`: a bound on a wait that would otherwise last until the test's own timeout. */
const failAfter = (ms: number, message: string) =>
  new Promise<never>((_, reject) => setTimeout(() => reject(new Error(message)), ms).unref());

/** Resolves once the socket has closed (at once when it already has). */
const closedSocket = (socket: net.Socket) =>
  socket.closed ? Promise.resolve() : new Promise<void>((resolve) => socket.once('close', () => resolve()));

interface Exchange {
  readonly sentBeforeSignal: boolean;
  /** Sent once a `/readyz` 503 had been received: the drain had begun. */
  readonly sentWhileDraining: boolean;
  answer?: Answer;
  error?: string;
}

/**
 * A steady stream of GETs, each of `connections` kept-alive connections (an agent of one socket) sending its
 * next request as soon as the last is answered, until a new connection is refused.
 */
class Stream {
  readonly exchanges: Exchange[] = [];
  signalled = false;
  drainingSeen = false;
  readonly loops: Promise<void>[];
  private readonly waiters: { count: number; wake: () => void }[] = [];

  constructor(
    private readonly base: string,
    private readonly path: string,
    private readonly token: string | undefined,
    connections: number,
  ) {
    this.loops = Array.from({ length: connections }, () => this.loop(new http.Agent({ keepAlive: true, maxSockets: 1 })));
  }

  /** Resolves once `count` requests have been answered. */
  answered(count: number): Promise<void> {
    return new Promise((wake) => {
      this.waiters.push({ count, wake });
      this.wakeWaiters();
    });
  }

  private async loop(agent: http.Agent): Promise<void> {
    try {
      for (;;) {
        const exchange: Exchange = { sentBeforeSignal: !this.signalled, sentWhileDraining: this.drainingSeen };
        this.exchanges.push(exchange);
        try {
          exchange.answer = await send(this.base, agent, 'GET', this.path, this.token);
          this.wakeWaiters();
        } catch (err) {
          exchange.error = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
          if (exchange.error === 'ECONNREFUSED') return; // no longer accepting
          if (!this.signalled || !(err as NodeJS.ErrnoException).code) throw err; // a connection cut once stopping, nothing else
        }
      }
    } finally {
      agent.destroy();
    }
  }

  private wakeWaiters(): void {
    const count = this.exchanges.filter((e) => e.answer).length;
    for (const waiter of this.waiters.filter((w) => w.count <= count)) {
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      waiter.wake();
    }
  }
}

/** A raw kept-alive HTTP/1.1 connection, to see the server end it (its FIN) rather than the client. */
class RawConnection {
  private buffer = '';
  private waiters: (() => void)[] = [];
  private done = false;
  readonly ended: Promise<void>;

  private constructor(private readonly socket: net.Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.ended = new Promise((resolve) =>
      socket.once('end', () => {
        this.done = true;
        for (const wake of this.waiters.splice(0)) wake();
        resolve();
      }),
    );
  }

  static open(base: string): Promise<RawConnection> {
    const { hostname, port } = new URL(base);
    return new Promise((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  /** GET `path` (the server's answer has a Content-Length); resolves with its status line and headers. */
  async get(path: string): Promise<{ status: number; headers: Record<string, string> }> {
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: works\r\n\r\n`);
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end >= 0) {
        const [statusLine, ...lines] = this.buffer.slice(0, end).split('\r\n');
        const headers = Object.fromEntries(
          lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
        );
        const length = Number(headers['content-length']);
        if (this.buffer.length >= end + 4 + length) {
          this.buffer = this.buffer.slice(end + 4 + length);
          return { status: Number(statusLine!.split(' ')[1]), headers };
        }
      }
      if (this.done) throw new Error('the server ended the connection without answering');
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/**
 * `/readyz` asked again and again over a kept-alive connection until a new connection is refused. Once it said
 * `draining`, a new connection may also be cut as the web stops accepting (idle, before its request was read).
 */
async function pollReadiness(base: string, onDraining: () => void): Promise<Answer[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const answers: Answer[] = [];
  let draining = false;
  try {
    for (;;) {
      try {
        const answer = await send(base, agent, 'GET', '/readyz');
        answers.push(answer);
        if (answer.status === 503 && answer.body?.status === 'draining' && !draining) {
          draining = true;
          onDraining();
        }
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ECONNREFUSED') return answers;
        if (!draining || !code) throw new Error(`GET /readyz failed (${code ?? (err as Error).message})`);
      }
    }
  } finally {
    agent.destroy();
  }
}

describe('web shutdown: SIGTERM to the Procfile line cuts nothing (issue 21)', function () {
  this.timeout(120_000);
  // nock (loaded for the identity provider's JWKS) sends every request of this process over a connection of
  // its own, never kept alive: off here, to keep connections alive as clients do
  before(() => nock.restore());
  after(() => nock.activate());
  let env: Env;
  let config: Config;
  let context: Resources;
  let workers: TestWorkers;
  let key: TestKey;

  before(async () => {
    // a queue prefix of its own: pausing the prepare queue below touches no other test
    const own: Env = {
      REDIS_PREFIX: `drain_${randomBytes(4).toString('hex')}`,
      RATE_LIMIT_PER_SECOND: '100000',
      RATE_LIMIT_BURST: '100000',
      PREPARE_TIMEOUT_MS: '60000',
    };
    env = { ...testServices().env, ...own };
    config = configWith(own);
    context = openResources(config, testLogger(), 'dev');
    await whenConnected(context);
    // prepare jobs only: a confirmed transaction stays pending (no chain worker on this prefix)
    workers = await startTestWorkers(config, ['prepare']);
    key = await createKey(context, await createOrg(context, 100_000));
  });
  after(async () => {
    await context.queues.prepare.resume();
    await workers.stop();
    await context.close();
  });

  /** init → PUT through `base`, then the prepare sent over a connection of its own; its job waits for `go`. */
  async function heldPrepare(base: string): Promise<{ answer: Promise<Answer>; go: () => Promise<void> }> {
    const init = await send(base, new http.Agent(), 'POST', '/v1/works/init', key.token, initBody());
    expect(init.status).to.equal(200);
    expect((await upload(init.body.upload_url, randomBytes(64 * 1024))).status).to.equal(200);
    await context.queues.prepare.pause();
    const agent = new http.Agent({ keepAlive: true });
    const answer = send(base, agent, 'POST', '/v1/works/prepare', key.token, { job_id: init.body.job_id });
    answer.catch(() => undefined).finally(() => agent.destroy());
    // the web has taken the request once its job waits in the paused queue
    await new Promise<void>((resolve, reject) => {
      const look = () => context.queues.prepare.getWaitingCount().then((count) => (count > 0 ? resolve() : setTimeout(look, 25)), reject);
      look();
    });
    return { answer, go: () => context.queues.prepare.resume() };
  }

  let web: WebProcess | undefined;
  afterEach(() => {
    web?.kill('SIGKILL'); // nothing to do when it exited as it should
    web = undefined;
  });

  it('answers every request sent before the signal, says 503 while still serving, closes kept-alive connections after their answer, exits 0', async () => {
    web = await spawnWeb({ ...env, SHUTDOWN_DRAIN_MS: '2000', SHUTDOWN_TIMEOUT_MS: '60000' });
    const base = web.url;
    // live sockets on a transaction that stays pending
    const registered = await register(base, key.token);
    expect(registered.confirm.status).to.equal(202);
    const txId: string = registered.confirm.body.transaction_id;
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/v1/ws/transactions/${txId}`, {
      headers: { Authorization: `Bearer ${key.token}` },
    });
    const wsClosed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })),
    );
    await new Promise((resolve, reject) => {
      ws.once('message', resolve);
      ws.once('error', reject);
    });
    const socketIo = ioClient(base, {
      path: '/v1/socket.io',
      extraHeaders: { Authorization: `Bearer ${key.token}` },
      transports: ['websocket'],
      reconnectionDelay: 50,
      reconnectionDelayMax: 200,
    });
    const cleanups: (() => void)[] = [];
    try {
      await new Promise<void>((resolve, reject) => {
        socketIo.once('connect', resolve);
        socketIo.once('connect_error', reject);
      });
      const ioDisconnected = new Promise<string>((resolve) => socketIo.once('disconnect', (reason) => resolve(reason)));
      const ioReconnecting = new Promise<void>((resolve) => socketIo.io.once('reconnect_attempt', () => resolve()));

      // a slow request: its prepare job waits in the paused queue until after the web stops accepting
      const slow = await heldPrepare(base);
      // a connection kept alive from before the signal, used again while draining
      const raw = await RawConnection.open(base);
      cleanups.push(() => raw.destroy());
      const before = await raw.get('/healthz');
      expect(before.status).to.equal(200);
      expect(before.headers.connection).to.equal('keep-alive');

      const stream = new Stream(base, '/v1/works?limit=5', key.token, 20);
      let drainingSeen!: () => void;
      const draining = new Promise<void>((resolve) => (drainingSeen = resolve));
      const readiness = pollReadiness(base, () => {
        stream.drainingSeen = true;
        drainingSeen();
      });
      await stream.answered(100);
      stream.signalled = true;
      web.kill('SIGTERM');

      // the drain (2 s): /readyz 503 (draining) while the web still answers; a kept-alive connection is answered and closed
      await Promise.race([
        draining,
        readiness.then(() => Promise.reject(new Error('the web stopped accepting without ever answering /readyz 503 draining'))),
        web.exited.then(() => Promise.reject(new Error('the web exited without ever answering /readyz 503 draining'))),
        failAfter(10_000, 'no /readyz 503 draining within 10 s of SIGTERM'),
      ]);
      const during = await raw.get('/healthz');
      expect(during.status).to.equal(200);
      expect(during.headers.connection).to.equal('close');
      await raw.ended; // the server's FIN, after the answer

      const answers = await readiness;
      const drainingAnswer = answers.find((a) => a.status === 503)!;
      expect(drainingAnswer.body).to.deep.equal({
        status: 'draining',
        checks: { shutdown: { ok: false, error: 'the process is stopping; send new requests elsewhere' } },
      });
      expect(answers.filter((a) => a.status === 200)).to.not.be.empty; // ready before the signal

      // no longer accepting (readiness saw ECONNREFUSED): the slow request, accepted before, is still answered
      await Promise.all(stream.loops);
      await slow.go();
      const slowAnswer = await slow.answer;
      expect(slowAnswer.status).to.equal(200);
      expect(slowAnswer.body.is_valid).to.equal(true);
      expect(slowAnswer.headers.connection).to.equal('close');

      // live sockets: 1012 (Service Restart) on the plain socket; socket.io loses its transport and reconnects
      const close = await wsClosed;
      expect(close.code).to.equal(1012);
      expect(close.reason).to.match(/restart/);
      expect(await ioDisconnected).to.equal('transport close');
      await ioReconnecting;

      expect(await web.exited).to.deep.equal({ code: 0, signal: null });

      const sentBefore = stream.exchanges.filter((e) => e.sentBeforeSignal);
      expect(sentBefore.length).to.be.greaterThan(100);
      expect(sentBefore.filter((e) => e.error).map((e) => e.error)).to.deep.equal([]);
      expect(sentBefore.every((e) => e.answer!.status === 200)).to.equal(true);
      // before the signal, connections were kept alive and used again
      expect(sentBefore.filter((e) => e.answer!.reused).length).to.be.greaterThan(sentBefore.length / 2);
      // while draining the web went on answering, each answer closing its connection
      const whileDraining = stream.exchanges.filter((e) => e.sentWhileDraining && e.answer);
      expect(whileDraining.length).to.be.greaterThan(0);
      for (const exchange of whileDraining) {
        expect(exchange.answer!.status).to.equal(200);
        expect(exchange.answer!.headers.connection).to.equal('close');
        await closedSocket(exchange.answer!.socket);
      }
    } finally {
      socketIo.close();
      ws.terminate();
      for (const cleanup of cleanups) cleanup();
    }
  });

  it('cuts what is still unanswered at SHUTDOWN_TIMEOUT_MS, names it in the log, and exits 0', async () => {
    web = await spawnWeb({ ...env, SHUTDOWN_DRAIN_MS: '100', SHUTDOWN_TIMEOUT_MS: '1500' });
    const { url } = web;
    const answered = async () => {
      for (let i = 0; i < 3; i++) {
        const answer = await fetch(`${url}/healthz`);
        await answer.arrayBuffer();
        expect(answer.status).to.equal(200);
      }
    };
    // requests answered before and while the slow one is held: only the slow one is still unanswered
    await answered();
    const slow = await heldPrepare(web.url);
    try {
      await answered();
      web.kill('SIGTERM');
      const cut = await web.logged('shutdown: ');
      expect(cut.msg).to.equal('shutdown: 1 request(s) still unanswered at the deadline, cut');
      expect(cut.requests.map((r: { method: string; path: string }) => `${r.method} ${r.path}`)).to.deep.equal(['POST /v1/works/prepare']);
      expect(cut.requests[0].elapsed_ms).to.be.greaterThan(1000);
      const err = await slow.answer.then(
        () => undefined,
        (e: NodeJS.ErrnoException) => e,
      );
      expect(err?.code).to.equal('ECONNRESET');
      expect(await web.exited).to.deep.equal({ code: 0, signal: null });
    } finally {
      await slow.go();
    }
  });
});
