import net from 'node:net';

/** A request as the proxy saw it go through: its head (request line and headers) and the upstream's answer. */
export interface Seen {
  readonly head: string;
  /** The upstream's whole answer (status line, headers, body), also when it was not passed on. */
  readonly answer: Promise<string>;
  header(name: string): string | undefined;
}

export interface CuttingProxy {
  readonly url: string;
  readonly seen: Seen[];
  close(): Promise<void>;
}

/**
 * A TCP proxy in front of `target` that passes every connection through, except that for the first `cut`
 * connections it reads the upstream's whole answer and then closes the client's socket without passing any of it
 * on: the server did the work, the client saw the connection drop. One request per connection is assumed for the
 * cut ones (a fresh client's first request opens a fresh connection). `cut` may instead pick the requests to cut by
 * their head (request line and headers): the connection carrying such a request is cut after its answer.
 */
export async function cuttingProxy(target: string, cut: number | ((head: string) => boolean) = 1): Promise<CuttingProxy> {
  const { hostname, port } = new URL(target);
  const seen: Seen[] = [];
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    let cutting = typeof cut === 'number' && connections++ < cut;
    const upstream = net.connect(Number(port), hostname);
    sockets.add(client).add(upstream);
    client.on('close', () => sockets.delete(client));
    upstream.on('close', () => sockets.delete(upstream));
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    let request = Buffer.alloc(0);
    let bodyLeft = 0;
    let answered: (text: string) => void = () => undefined;
    let response = '';
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      request = Buffer.concat([request, chunk]);
      // each request's head in turn, skipping its body (Content-Length)
      for (;;) {
        const skip = Math.min(bodyLeft, request.length);
        request = request.subarray(skip);
        bodyLeft -= skip;
        const end = request.indexOf('\r\n\r\n');
        if (bodyLeft > 0 || end < 0) return;
        const head = request.subarray(0, end).toString('latin1');
        request = request.subarray(end + 4);
        bodyLeft = Number(head.match(/^content-length:\s*(\d+)/im)?.[1] ?? 0);
        if (typeof cut === 'function' && cut(head)) cutting = true;
        const answer = new Promise<string>((resolve) => (answered = resolve));
        seen.push({ head, answer, header: (name) => head.match(new RegExp(`^${name}:\\s*(.*)$`, 'im'))?.[1]?.trim() });
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      response += chunk.toString('latin1');
      const end = response.indexOf('\r\n\r\n');
      const length = Number(response.slice(0, end).match(/^content-length:\s*(\d+)/im)?.[1] ?? NaN);
      const complete = end >= 0 && Buffer.byteLength(response, 'latin1') >= end + 4 + length;
      if (!cutting) {
        client.write(chunk);
        if (complete) {
          answered(response);
          response = '';
        }
        return;
      }
      if (complete) {
        answered(response);
        client.destroy();
        upstream.destroy();
      }
    });
    upstream.on('end', () => client.end());
    client.on('end', () => upstream.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    seen,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
