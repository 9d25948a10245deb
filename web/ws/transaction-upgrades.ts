import { authDepsOf } from '../middleware/auth';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { Resources } from '../../shared/resources';
import { AppError } from '../../shared/errors';
import { getTransaction } from '../../shared/transactions/service';
import { pickRequestId } from '../middleware/request-id';
import type { TransactionUpdatesHub } from './hub';
import type { LiveConnections } from './connections';
import { authenticateLive, envelope, refusalOf, type Refusal } from './authenticate';
import { TransactionSocket } from './transaction-socket';

const ROUTE = /^\/v1\/ws\/transactions\/([^/]+)\/?$/;

export interface TransactionUpgradeDeps {
  readonly app: Resources;
  readonly hub: TransactionUpdatesHub;
  readonly connections: LiveConnections;
}

/**
 * The plain RFC 6455 socket at `ws_url` (docs/api.md#websocket). The upgrade is authenticated, counted against the
 * organization and checked against the transaction before it is accepted; a refusal is an ordinary HTTP
 * response with the error envelope (401, 404, 429, 503), and no socket is opened.
 */
export function transactionUpgrades(deps: TransactionUpgradeDeps) {
  const { app, hub, connections } = deps;
  const live = app.config.live;
  // clients send nothing, so a frame over 4 KB is a misbehaving one; no compression keeps sockets small
  const wss = new WebSocketServer({ noServer: true, clientTracking: false, perMessageDeflate: false, maxPayload: 4096 });
  const limits = { idleMs: live.idleTimeoutSeconds * 1000, maxBufferedBytes: live.maxBufferedBytes };

  async function handle(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const requestId = pickRequestId(req.headers['x-request-id'] as string | undefined);
    socket.on('error', () => socket.destroy()); // a client gone mid-handshake
    const url = new URL(req.url ?? '/', 'http://localhost');
    const transactionId = ROUTE.exec(url.pathname)?.[1];
    let release: (() => void) | undefined;
    let tracker: TransactionSocket | undefined;
    try {
      if (!transactionId) throw new AppError('common.not_found', 'No such route');
      const principal = await authenticateLive(authDepsOf(app), {
        authorization: req.headers.authorization,
        accessToken: url.searchParams.get('access_token') ?? undefined,
      });
      release = connections.reserve(principal.organizationId);
      await hub.whenSubscribed();
      const follower = new TransactionSocket(hub, transactionId, limits, (s) => {
        connections.delete(s);
        release!();
      });
      tracker = follower;
      const current = await getTransaction(app.db, principal, transactionId);
      if (socket.destroyed) return follower.end();
      let accepted = false;
      socket.once('close', () => accepted || follower.end()); // a handshake ws itself refused (400, 426)
      wss.handleUpgrade(req, socket, head, (ws) => {
        accepted = true;
        connections.add(follower);
        follower.open(ws, current);
      });
    } catch (err) {
      if (tracker) tracker.end();
      else release?.();
      refuse(socket, refusalOf(err, app.log, requestId), requestId);
    }
  }

  return {
    handle(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
      void handle(req, socket, head);
    },
    close(): void {
      wss.close();
    },
  };
}

function refuse(socket: Duplex, refusal: Refusal, requestId: string): void {
  if (!socket.writable) return void socket.destroy();
  const body = JSON.stringify(envelope(refusal, requestId));
  const headers: Record<string, string | number> = {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    'X-Request-Id': requestId,
    Connection: 'close',
    ...refusal.headers,
  };
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}`)
    .join('\r\n');
  socket.once('finish', () => socket.destroy());
  socket.end(`HTTP/1.1 ${refusal.status} ${http.STATUS_CODES[refusal.status] ?? ''}\r\n${head}\r\n\r\n${body}`);
}
