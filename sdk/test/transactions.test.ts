import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import http from 'node:http';
import type net from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { useStack } from '../../test/helpers/workers';
import { createKey, createOrg } from '../../test/helpers/factories';
import { createClient, type Transaction, type WebSocketConstructor } from '../src';
import { sineWav } from './audio';

/**
 * A server in front of `target` that passes every HTTP request through but takes the WebSocket upgrades itself:
 * `answer` completes the handshake and then stays silent (no frame; a ping every `pingEveryMs` when given, else
 * none), else the upgrade is never answered. `pongs` counts the client's answers to the pings.
 */
async function silentSocketServer(target: string, answer: boolean, pingEveryMs?: number) {
  const upgrades: string[] = [];
  const pongs = new EventEmitter();
  let pongCount = 0;
  const timers: NodeJS.Timeout[] = [];
  const sockets = new Set<net.Socket>();
  const wss = new WebSocketServer({ noServer: true });
  const server = http.createServer((req, res) => {
    const upstream = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (answered) => {
      res.writeHead(answered.statusCode!, answered.headers);
      answered.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('upgrade', (req, socket, head) => {
    upgrades.push(req.url!);
    if (!answer) return;
    wss.handleUpgrade(req, socket, head, (ws) => {
      if (pingEveryMs === undefined) return;
      timers.push(setInterval(() => ws.ping(), pingEveryMs));
      ws.on('pong', () => pongs.emit('pong', ++pongCount));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    upgrades,
    /** Resolves once the client has answered `n` pings. */
    pongs: (n: number) =>
      new Promise<void>((resolve) => {
        const check = (count: number) => {
          if (count < n) return;
          pongs.off('pong', check);
          resolve();
        };
        pongs.on('pong', check);
      }),
    close: async () => {
      for (const timer of timers) clearInterval(timer);
      for (const socket of sockets) socket.destroy();
      wss.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A fetch recording the paths it asks for. */
function recordingFetch() {
  const paths: string[] = [];
  const fetchImpl: typeof fetch = (input, init) => {
    paths.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
    return fetch(input, init);
  };
  return { fetch: fetchImpl, paths };
}

describe('@works-api/client: transactions.wait when the WebSocket misbehaves', function () {
  this.timeout(180_000);
  const stack = useStack({ queues: ['prepare', 'chain'] });
  let token: string;
  let finalized: Transaction;

  before(async () => {
    const key = await createKey(stack.app.context, await createOrg(stack.app.context));
    token = key.token;
    const client = createClient({ baseUrl: stack.app.url, token });
    const { transaction_id } = await client.works.register(
      {
        network: 'testnet',
        title: 'Waited',
        filename: 'w.wav',
        external_user_ref: 'listener-1',
        creators: [{ full_name: 'Ada', roles: { author: true } }],
      },
      sineWav(1),
    );
    finalized = await client.transactions.wait(transaction_id, { pollIntervalMs: 100 });
    expect(finalized.is_complete).to.equal(true);
  });

  for (const answer of [true, false]) {
    const what = answer ? 'opens and then stays silent' : 'never answers the upgrade';
    it(`a socket that ${what} is dropped at its deadline, and the wait polls and resolves`, async () => {
      const silent = await silentSocketServer(stack.app.url, answer);
      try {
        const rest = recordingFetch();
        const client = createClient({ baseUrl: silent.url, token, WebSocket, fetch: rest.fetch });
        const done = await client.transactions.wait(finalized.transaction_id, {
          handshakeTimeoutMs: answer ? 60_000 : 200,
          livenessTimeoutMs: answer ? 200 : 60_000,
          pollIntervalMs: 50,
        });
        expect(done).to.deep.equal(finalized);
        expect(silent.upgrades).to.deep.equal([`/v1/ws/transactions/${finalized.transaction_id}`]);
        expect(rest.paths).to.deep.equal([`/v1/transactions/${finalized.transaction_id}`]);
      } finally {
        await silent.close();
      }
    });
  }

  it('a server ping is a sign of life: a socket pinged but sent no frame is kept past the liveness deadline', async () => {
    const silent = await silentSocketServer(stack.app.url, true, 25);
    try {
      const rest = recordingFetch();
      const client = createClient({ baseUrl: silent.url, token, WebSocket, fetch: rest.fetch });
      // 20 pings take 500 ms, past the 200 ms deadline that would have dropped the socket without them
      const stop = new AbortController();
      const reason = new Error('enough pings');
      void silent.pongs(20).then(() => stop.abort(reason));
      const error = await client.transactions
        .wait(finalized.transaction_id, { livenessTimeoutMs: 200, pollIntervalMs: 50, signal: stop.signal })
        .catch((err: unknown) => err);
      expect(error).to.equal(reason);
      expect(rest.paths).to.deep.equal([]);
    } finally {
      await silent.close();
    }
  });

  it('a WebSocket constructor that throws makes the wait poll', async () => {
    const Throwing = class {
      constructor() {
        throw new Error('no sockets here');
      }
    } as unknown as WebSocketConstructor;
    const rest = recordingFetch();
    const client = createClient({ baseUrl: stack.app.url, token, WebSocket: Throwing, fetch: rest.fetch });
    expect(await client.transactions.wait(finalized.transaction_id)).to.deep.equal(finalized);
    expect(rest.paths).to.deep.equal([`/v1/transactions/${finalized.transaction_id}`]);
  });

  for (const mode of ['the WebSocket', 'polling'] as const) {
    it(`over ${mode}, an onUpdate that throws rejects the wait with what it threw`, async () => {
      const client = createClient({ baseUrl: stack.app.url, token, WebSocket: mode === 'polling' ? undefined : WebSocket });
      const thrown = new Error('the partner’s handler failed');
      const error = await client.transactions
        .wait(finalized.transaction_id, {
          onUpdate: () => {
            throw thrown;
          },
        })
        .catch((err: unknown) => err);
      expect(error).to.equal(thrown);
    });
  }

  it('a session token follows the transaction over the socket with the Authorization header, not the query', async () => {
    const { session_token } = await createClient({ baseUrl: stack.app.url, token }).sessions.create('listener-1');
    const opened: { url: string; authorization: string | undefined }[] = [];
    class Recording extends WebSocket {
      constructor(url: string, options?: WebSocket.ClientOptions) {
        super(url, options);
        opened.push({ url, authorization: (options?.headers as Record<string, string> | undefined)?.Authorization });
      }
    }
    const rest = recordingFetch();
    const client = createClient({ baseUrl: stack.app.url, token: session_token, WebSocket: Recording, fetch: rest.fetch });
    expect(await client.transactions.wait(finalized.transaction_id)).to.deep.equal(finalized);
    expect(opened).to.deep.equal([
      {
        url: `${stack.app.url.replace(/^http/, 'ws')}/v1/ws/transactions/${finalized.transaction_id}`,
        authorization: `Bearer ${session_token}`,
      },
    ]);
    // the socket answered: no REST call was needed
    expect(rest.paths).to.deep.equal([]);
  });
});
