import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { HttpDrain } from '../../web/drain';
import { logsFromNow, testLogger } from '../helpers/app';

interface Cut {
  readonly msg: string;
  readonly requests: { method: string; path: string; elapsed_ms: number }[];
}

/**
 * A server whose `/hold/<name>` requests wait until the test answers them and whose other requests are answered at
 * once, followed by an HttpDrain as the web's is, logging as the tests' apps do.
 */
async function drainedServer() {
  const lines = logsFromNow();
  const held = new Map<string, http.ServerResponse>();
  const seen: string[] = [];
  const arrived: (() => void)[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    if (req.url?.startsWith('/hold/')) held.set(req.url.slice('/hold/'.length), res);
    else res.end('ok');
    arrived.splice(0).forEach((wake) => wake());
  });
  const drain = new HttpDrain(testLogger());
  drain.watch(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    port,
    drain,
    held,
    /** Resolves once the server has received `count` requests in all. */
    async received(count: number): Promise<void> {
      while (seen.length < count) await new Promise<void>((wake) => arrived.push(wake));
    },
    /** A request on a connection of its own, its answer (or the error that ended it) awaited by nobody. */
    send(path: string): void {
      http.get({ port, host: '127.0.0.1', path, agent: false }, (res) => res.resume()).on('error', () => undefined);
    },
    cut: (): Cut | undefined =>
      lines()
        .map((line) => JSON.parse(line) as Cut)
        .find((l) => l.msg.startsWith('shutdown:')),
  };
}

/** A connection of its own, written to raw (HTTP pipelining), what it received kept. */
async function rawConnection(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  let received = '';
  const waiting: (() => void)[] = [];
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString();
    waiting.splice(0).forEach((wake) => wake());
  });
  await once(socket, 'connect');
  return {
    socket,
    received: () => received,
    /** Resolves once what it received includes `text`. */
    async until(text: string): Promise<void> {
      while (!received.includes(text)) await new Promise<void>((wake) => waiting.push(wake));
    },
  };
}

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;

/** A held request on a raw connection whose response has begun (its headers out, promising keep-alive). */
async function streaming() {
  const s = await drainedServer();
  const c = await rawConnection(s.port);
  c.socket.write(get('/hold/streamed'));
  await s.received(1);
  const res = s.held.get('streamed')!;
  res.write('first part;');
  await c.until('first part;');
  return { s, c, res };
}

describe('web drain: the requests it names at the shutdown deadline', () => {
  it('names the requests still unanswered, in the order they arrived, whatever slots the answered ones left free', async () => {
    const s = await drainedServer();
    s.send('/hold/a');
    await s.received(1);
    s.send('/hold/b');
    await s.received(2);
    // a's slot (the first) is emptied, then taken by c, the one free: c sits before b in the slots, after it in arrival
    s.held.get('a')!.end('ok');
    await once(s.held.get('a')!, 'close');
    s.send('/hold/c');
    await s.received(3);

    await s.drain.close(Date.now() + 50);
    expect(s.cut()?.msg).to.equal('shutdown: 2 request(s) still unanswered at the deadline, cut');
    expect(s.cut()?.requests.map((r) => `${r.method} ${r.path}`)).to.deep.equal(['GET /hold/b', 'GET /hold/c']);
  });

  it('ends a kept-alive connection once the response under way when the drain began is answered, cutting nothing', async () => {
    const { s, c, res } = await streaming();

    s.drain.begin();
    // the deadline comes before Node's keepAliveTimeout (5 s) would close the connection
    const closing = s.drain.close(Date.now() + 2000);
    const ended = once(c.socket, 'close');
    res.end('last part');
    await ended;
    await closing;
    expect(c.received()).to.match(/^Connection: keep-alive\r$/im);
    expect(c.received()).to.include('last part\r\n0\r\n\r\n');
    expect(s.cut(), 'nothing was left to cut at the deadline').to.equal(undefined);
  });

  it('answers a request sent on that kept-alive connection before close(), saying Connection: close', async () => {
    const { s, c, res } = await streaming();

    s.drain.begin();
    res.end('last part');
    await c.until('last part\r\n0\r\n\r\n');
    // the client reuses the connection at once, as a kept-alive pool does
    const ended = once(c.socket, 'close');
    c.socket.write(get('/next'));
    await ended;
    const second = c.received().split('last part\r\n0\r\n\r\n')[1]!;
    expect(second).to.match(/^HTTP\/1.1 200 OK\r$/m);
    expect(second).to.match(/^Connection: close\r$/im);
    expect(second).to.match(/ok$/);
    await s.drain.close(Date.now() + 2000);
    expect(s.cut()).to.equal(undefined);
  });

  it('leaves a kept-alive connection to a response queued behind the one under way, which says Connection: close', async () => {
    const s = await drainedServer();
    const c = await rawConnection(s.port);
    c.socket.write(get('/hold/first') + get('/hold/second'));
    await s.received(2);
    s.held.get('first')!.write('first part;');
    await c.until('first part;');

    s.drain.begin();
    const closing = s.drain.close(Date.now() + 2000);
    const ended = once(c.socket, 'close');
    s.held.get('first')!.end('first done;');
    await once(s.held.get('first')!, 'close');
    s.held.get('second')!.end('second done');
    await ended;
    await closing;
    const [first, second] = c.received().split('first done;');
    expect(first).to.match(/^Connection: keep-alive\r$/im);
    expect(second).to.match(/^Connection: close\r$/im);
    expect(second).to.include('second done');
    expect(s.cut()).to.equal(undefined);
  });

  for (const when of ['before', 'after'] as const) {
    it(`answers both of two pipelined requests, the second received ${when} the drain began, only the second saying Connection: close`, async () => {
      const s = await drainedServer();
      const c = await rawConnection(s.port);
      c.socket.write(get('/hold/one') + (when === 'before' ? get('/hold/two') : ''));
      await s.received(when === 'before' ? 2 : 1);
      s.drain.begin();
      if (when === 'after') {
        c.socket.write(get('/hold/two'));
        await s.received(2);
      }

      const ended = once(c.socket, 'close');
      s.held.get('one')!.end('one;');
      s.held.get('two')!.end('two;');
      await ended;
      const [first, second] = c.received().split('one;');
      expect(first).to.not.match(/^Connection: close\r$/im);
      expect(second, 'the second answer').to.match(/^Connection: close\r$/im);
      expect(second).to.match(/two;$/);
      await s.drain.close(Date.now() + 2000);
      expect(s.cut()).to.equal(undefined);
    });
  }

  it('forgets the responses queued behind another on its connection when the client goes away before they are answered', async () => {
    const s = await drainedServer();
    const warnings: Error[] = [];
    const warned = (w: Error) => warnings.push(w);
    process.on('warning', warned);
    // requests in one write on one connection (HTTP pipelining): the others' responses wait for the first's
    const { socket } = await rawConnection(s.port);
    socket.write(get('/hold/first') + get('/queued').repeat(12));
    await s.received(13);
    socket.destroy();
    // the held response closes with the server's end of the connection, after that connection's own 'close'
    await once(s.held.get('first')!, 'close');
    s.send('/hold/later');
    await s.received(14);

    await s.drain.close(Date.now() + 50);
    process.off('warning', warned);
    expect(s.cut()?.requests.map((r) => `${r.method} ${r.path}`)).to.deep.equal(['GET /hold/later']);
    // one listener on the connection, not one per queued response (eleven would warn of a leak)
    expect(warnings.map((w) => w.name)).to.not.include('MaxListenersExceededWarning');
  });
});
