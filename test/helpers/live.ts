import WebSocket from 'ws';
import { io as ioClient, type Socket as IoSocket } from 'socket.io-client';

/** A frame of live tracking (docs/api.md#websocket): the plain WebSocket's and socket.io's `update` alike. */
export interface Frame {
  type: 'connected' | 'update' | 'error';
  transaction: Record<string, any>;
}

export const STEPS = ['validating', 'preparing_transaction', 'signing', 'submitting', 'confirming', 'completed'];

/** A plain `ws` client that keeps every frame and resolves its waits on events. */
export class Client {
  readonly frames: Frame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: (() => void)[] = [];

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.frames.push(JSON.parse(String(data)));
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })));
  }

  /** Resolves once `count` frames have arrived. */
  async frameCount(count: number): Promise<Frame[]> {
    while (this.frames.length < count) await new Promise<void>((resolve) => this.waiters.push(resolve));
    return this.frames;
  }
}

export const wsUrl = (base: string, path: string) => base.replace(/^http/, 'ws') + path;

/** Opens the plain WebSocket at `path` of the web at `base`, listening before the first frame can arrive. */
export function connect(base: string, path: string, token?: string, options: WebSocket.ClientOptions = {}): Promise<Client> {
  const ws = new WebSocket(wsUrl(base, path), { ...options, headers: token ? { Authorization: `Bearer ${token}` } : {} });
  const client = new Client(ws);
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(client));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

/** A socket.io client of the web at `base`, connected (the credential in the HTTP handshake). */
export async function connectSocketIo(base: string, token: string, options: Parameters<typeof ioClient>[1] = {}): Promise<IoSocket> {
  const socket = ioClient(base, {
    path: '/v1/socket.io',
    extraHeaders: { Authorization: `Bearer ${token}` },
    reconnection: false,
    ...options,
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('connect_error', reject);
  });
  return socket;
}
