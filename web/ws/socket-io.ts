import { authDepsOf } from '../middleware/auth';
import type http from 'node:http';
import { Server, type DefaultEventsMap, type Socket } from 'socket.io';
import type { Resources } from '../../shared/resources';
import type { Principal } from '../../shared/api-keys/types';
import { getTransaction, type TransactionView } from '../../shared/transactions/service';
import { pickRequestId } from '../middleware/request-id';
import type { TransactionUpdatesHub } from './hub';
import type { LiveConnection, LiveConnections } from './connections';
import { authenticateLive, envelope, refusalOf } from './authenticate';
import { TransactionFeed } from './feed';

export const SOCKET_IO_PATH = '/v1/socket.io';
/** Transactions one socket.io connection may follow at once. */
const MAX_SUBSCRIPTIONS = 100;

type Frame =
  | { type: 'connected' | 'update'; transaction: TransactionView }
  | { type: 'error'; transaction: null; error: { code: string; message: string } };
type Ack = (frame: Frame) => void;
/** What a socket carries once its handshake is authenticated (set in the io.use below). */
interface SocketData {
  principal: Principal;
}
type LiveSocket = Socket<DefaultEventsMap, DefaultEventsMap, DefaultEventsMap, SocketData>;

export interface SocketIoDeps {
  readonly app: Resources;
  readonly hub: TransactionUpdatesHub;
  readonly connections: LiveConnections;
}

/**
 * socket.io on the web's HTTP server for clients that want automatic reconnection (docs/api.md#socketio): the same
 * authentication as the plain socket, then `subscribe` with a transaction id. The credential travels in the
 * HTTP handshake itself (`Authorization: Bearer`, or `?access_token=` for a session token) and is checked
 * there, before engine.io allocates a session: an anonymous or forged handshake costs one lookup and a 403,
 * nothing that lingers (`auth.token` in the CONNECT packet came too late for that). Every web process receives
 * every update from the shared Redis channel, so a client reaches its updates whichever process it is on.
 */
export function attachSocketIo(server: http.Server, deps: SocketIoDeps): Server {
  const { app, connections } = deps;
  const heartbeatMs = app.config.live.heartbeatSeconds * 1000;
  const authDeps = authDepsOf(app);
  const io = new Server<DefaultEventsMap, DefaultEventsMap, DefaultEventsMap, SocketData>(server, {
    path: SOCKET_IO_PATH,
    serveClient: false,
    destroyUpgrade: false, // the plain WebSocket route answers the other upgrades
    maxHttpBufferSize: 16 * 1024,
    pingInterval: heartbeatMs,
    pingTimeout: Math.min(20_000, heartbeatMs),
    connectTimeout: 10_000,
    allowRequest: (req, callback) => {
      const accessToken = new URL(req.url ?? '/', 'http://handshake').searchParams.get('access_token') ?? undefined;
      authenticateLive(authDeps, { authorization: req.headers.authorization, accessToken }).then(
        () => callback(null, true),
        (err: unknown) => {
          const refusal = refusalOf(err, app.log, pickRequestId(req.headers['x-request-id'] as string | undefined));
          callback(`${refusal.code}: ${refusal.message}`, false);
        },
      );
    },
  });
  io.use(async (socket, next) => {
    const requestId = pickRequestId(socket.handshake.headers['x-request-id'] as string | undefined);
    try {
      // the handshake's credential, checked by allowRequest; read again here (it may have been revoked since)
      const accessToken = socket.handshake.query.access_token;
      const principal = await authenticateLive(authDeps, {
        authorization: socket.handshake.headers.authorization,
        accessToken: typeof accessToken === 'string' ? accessToken : undefined,
      });
      const release = connections.reserve(principal.organizationId);
      socket.conn.once('close', release);
      socket.data.principal = principal;
      next();
    } catch (err) {
      const refusal = refusalOf(err, app.log, requestId);
      next(Object.assign(new Error(refusal.message), { data: envelope(refusal, requestId) }));
    }
  });
  io.on('connection', (socket) => {
    const subscriber = new SocketIoSubscriber(socket, deps);
    connections.add(subscriber);
    socket.once('disconnect', () => {
      subscriber.end();
      connections.delete(subscriber);
    });
  });
  return io;
}

interface Subscription {
  readonly feed: TransactionFeed;
  readonly stop: () => void;
}

class SocketIoSubscriber implements LiveConnection {
  private readonly subscriptions = new Map<string, Subscription>();
  private readonly principal: Principal;
  private lastActivity = Date.now();

  constructor(
    private readonly socket: LiveSocket,
    private readonly deps: SocketIoDeps,
  ) {
    this.principal = socket.data.principal;
    socket.onAny(() => (this.lastActivity = Date.now()));
    socket.on('subscribe', (id: unknown, ack?: unknown) => void this.subscribe(id, typeof ack === 'function' ? (ack as Ack) : undefined));
    socket.on('unsubscribe', (id: unknown) => typeof id === 'string' && this.unsubscribe(id));
  }

  tick(now: number): void {
    // engine.io pings on its own; only idleness is ours to check
    if (now - this.lastActivity > this.deps.app.config.live.idleTimeoutSeconds * 1000) this.socket.disconnect(true);
  }

  shutdown(): void {
    // the transport closed, not the socket disconnected: a client told `io server disconnect` would not reconnect
    this.socket.conn.close();
  }

  end(): void {
    for (const id of [...this.subscriptions.keys()]) this.unsubscribe(id);
  }

  /** Answers with `connected` and the current state (through the ack, else as an event), then `update`s. */
  private async subscribe(id: unknown, ack: Ack | undefined): Promise<void> {
    const reply = (frame: Frame): void => {
      if (ack) ack(frame);
      else this.socket.emit(frame.type, frame);
    };
    if (typeof id !== 'string' || id.length === 0 || id.length > 64) {
      return reply({
        type: 'error',
        transaction: null,
        error: { code: 'common.validation_failed', message: 'subscribe takes a transaction id' },
      });
    }
    this.unsubscribe(id);
    if (this.subscriptions.size >= MAX_SUBSCRIPTIONS) {
      return reply({
        type: 'error',
        transaction: null,
        error: { code: 'organization.rate_limited', message: `At most ${MAX_SUBSCRIPTIONS} subscriptions per connection` },
      });
    }
    const pending: TransactionView[] = [];
    let open = false;
    const feed = new TransactionFeed();
    const subscription: Subscription = {
      feed,
      stop: this.deps.hub.listen(id, (view) => (open ? this.deliver(id, subscription, view) : pending.push(view))),
    };
    this.subscriptions.set(id, subscription);
    let current: TransactionView;
    try {
      current = await getTransaction(this.deps.app.db, this.principal, id);
    } catch (err) {
      if (this.subscriptions.get(id) === subscription) this.unsubscribe(id);
      const refusal = refusalOf(err, this.deps.app.log, pickRequestId(undefined));
      return reply({ type: 'error', transaction: null, error: { code: refusal.code, message: refusal.message } });
    }
    if (this.subscriptions.get(id) !== subscription) return; // unsubscribed or disconnected meanwhile
    feed.accept(current);
    reply({ type: 'connected', transaction: current });
    open = true;
    for (const view of pending.splice(0)) this.deliver(id, subscription, view);
    if (feed.ended) this.unsubscribe(id);
  }

  private deliver(id: string, subscription: Subscription, view: TransactionView): void {
    if (!subscription.feed.accept(view)) return;
    if (this.pendingBytes() > this.deps.app.config.live.maxBufferedBytes) return void this.socket.disconnect(true);
    this.socket.emit('update', { type: 'update', transaction: view } satisfies Frame);
    this.lastActivity = Date.now();
    if (subscription.feed.ended) this.unsubscribe(id);
  }

  private unsubscribe(id: string): void {
    const subscription = this.subscriptions.get(id);
    if (!subscription) return;
    subscription.stop();
    this.subscriptions.delete(id);
  }

  /** What engine.io still holds for this client: packets not yet written, plus the WebSocket's own buffer. */
  private pendingBytes(): number {
    const conn = this.socket.conn as unknown as {
      writeBuffer?: { data?: unknown }[];
      transport?: { socket?: { bufferedAmount?: number } };
    };
    const queued = (conn.writeBuffer ?? []).reduce((sum, packet) => sum + (typeof packet.data === 'string' ? packet.data.length : 1024), 0);
    return queued + (conn.transport?.socket?.bufferedAmount ?? 0);
  }
}
