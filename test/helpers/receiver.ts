import http from 'node:http';
import { EventEmitter } from 'node:events';
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface Received {
  readonly headers: http.IncomingHttpHeaders;
  readonly raw: string;
  readonly body: any;
  readonly at: number;
  /** The connection it came over: the address it reached (the receiver's) and the sender's port. */
  readonly connection: { readonly localAddress: string; readonly remotePort: number };
}

/** A real local webhook receiver (a free port of 127.0.0.1 unless told otherwise); `respond` decides each answer. */
export class WebhookReceiver {
  readonly received: Received[] = [];
  private readonly events = new EventEmitter();
  private server!: http.Server;
  url = '';
  respond: (req: Received, index: number) => { status: number; headers?: Record<string, string>; delayMs?: number } | 'hang' = () => ({
    status: 200,
  });

  /** Listens on `host` (127.0.0.1, or another loopback address) and `port` (a free one by default). */
  async start(host = '127.0.0.1', port = 0): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const connection = { localAddress: req.socket.localAddress ?? '', remotePort: req.socket.remotePort ?? 0 };
        const entry: Received = { headers: req.headers, raw, body: safeJson(raw), at: Date.now(), connection };
        const index = this.received.push(entry) - 1;
        const answer = this.respond(entry, index);
        this.events.emit('request', entry);
        if (answer === 'hang') return;
        const send = () => res.writeHead(answer.status, answer.headers).end('ok');
        if (answer.delayMs) setTimeout(send, answer.delayMs);
        else send();
      });
    });
    await new Promise<void>((resolve, reject) => this.server.once('error', reject).listen(port, host, resolve));
    this.url = `http://${host}:${(this.server.address() as { port: number }).port}/hooks`;
    return this;
  }

  /** Resolves when `count` requests in all have arrived. */
  waitFor(count: number, timeoutMs = 60_000): Promise<Received[]> {
    if (this.received.length >= count) return Promise.resolve(this.received.slice(0, count));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${this.received.length} of ${count} webhooks arrived`)), timeoutMs);
      const listener = () => {
        if (this.received.length >= count) {
          clearTimeout(timer);
          this.events.off('request', listener);
          resolve(this.received.slice(0, count));
        }
      };
      this.events.on('request', listener);
    });
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const safeJson = (raw: string) => {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
};

/**
 * An implementation of docs/api.md#headers-and-signature written from the text, independent of the service's code: HMAC-SHA256
 * keyed with the base64-decoded secret over `<t>.<raw body>`, hex, compared in constant time.
 */
export function verifySignature(secretBase64: string, received: Received, toleranceSeconds = 300): boolean {
  const header = String(received.headers['x-service-signature'] ?? '');
  const parts = Object.fromEntries(header.split(',').map((p) => p.split('=') as [string, string]));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || String(t) !== received.headers['x-service-timestamp']) return false;
  if (Math.abs(Date.now() / 1000 - t) > toleranceSeconds) return false;
  const expected = createHmac('sha256', Buffer.from(secretBase64, 'base64')).update(`${t}.${received.raw}`).digest();
  const given = Buffer.from(parts.v1 ?? '', 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
