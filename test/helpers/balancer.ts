import net from 'node:net';

/**
 * A connection-level load balancer, as a cloud's network balancer is: each new TCP connection goes, round
 * robin, to a backend whose `/readyz` answered 200 at the last poll; a connection stays with its backend (HTTP
 * keep-alive, WebSockets) until either side closes it. Backends are added and removed as a deploy would.
 */
export interface Balancer {
  readonly url: string;
  add(backendUrl: string): void;
  remove(backendUrl: string): void;
  /** Resolves once `backendUrl` has been seen ready (or, with `ready` false, seen not ready). */
  until(backendUrl: string, ready: boolean): Promise<void>;
  close(): Promise<void>;
}

export async function startBalancer(pollMs = 100): Promise<Balancer> {
  const backends = new Map<string, { ready: boolean; polled: boolean }>();
  const waiters: { url: string; ready: boolean; resolve: () => void }[] = [];
  const sockets = new Set<net.Socket>();
  let turn = 0;

  const poll = async (url: string) => {
    const state = backends.get(url);
    if (!state) return;
    const ready = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (!backends.has(url)) return;
    Object.assign(state, { ready, polled: true });
    for (const w of waiters.filter((x) => x.url === url && x.ready === ready)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  };
  let polling = false;
  const timer = setInterval(() => {
    if (polling) return;
    polling = true;
    void Promise.all([...backends.keys()].map(poll)).finally(() => (polling = false));
  }, pollMs);

  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('error', () => undefined);
    client.once('close', () => sockets.delete(client));
    const ready = [...backends].filter(([, s]) => s.ready).map(([url]) => url);
    if (ready.length === 0) return void client.destroy();
    const target = new URL(ready[turn++ % ready.length]!);
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(upstream);
    upstream.on('error', () => undefined);
    upstream.once('close', () => {
      sockets.delete(upstream);
      client.destroy();
    });
    client.once('close', () => upstream.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    add: (url) => void backends.set(url, { ready: false, polled: false }),
    remove: (url) => void backends.delete(url),
    until: (url, ready) =>
      new Promise<void>((resolve) => {
        const state = backends.get(url);
        if (state?.polled && state.ready === ready) return resolve();
        waiters.push({ url, ready, resolve });
      }),
    async close() {
      clearInterval(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
