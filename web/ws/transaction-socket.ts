import { WebSocket } from 'ws';
import type { TransactionView } from '../../shared/transactions/service';
import type { TransactionUpdatesHub } from './hub';
import type { LiveConnection } from './connections';
import { frame, TransactionFeed } from './feed';

export interface SocketLimits {
  readonly idleMs: number;
  readonly maxBufferedBytes: number;
}

/**
 * Close codes: 1000 after a terminal state (docs/api.md#websocket); 1001 when idle; 1012 (Service Restart) when the
 * process stops: reconnect, and `connected` brings the current state.
 */
export const CLOSE_COMPLETE = 1000;
export const CLOSE_GOING_AWAY = 1001;
export const CLOSE_SERVICE_RESTART = 1012;

/**
 * One plain WebSocket following one transaction. It starts listening to the hub before the current state is
 * read, so nothing published meanwhile is lost; what arrives before the socket is open waits in `pending`
 * and the feed drops whatever the `connected` frame already covers.
 */
export class TransactionSocket implements LiveConnection {
  private readonly feed = new TransactionFeed();
  private readonly stopListening: () => void;
  private ws: WebSocket | undefined;
  private pending: TransactionView[] = [];
  private alive = true;
  private lastActivity = Date.now();
  private ended = false;

  constructor(
    hub: TransactionUpdatesHub,
    transactionId: string,
    private readonly limits: SocketLimits,
    private readonly onEnd: (socket: TransactionSocket) => void,
  ) {
    this.stopListening = hub.listen(transactionId, (view, encoded) => this.update(view, encoded));
  }

  /** The handshake is done: send the current state, then anything newer that came in meanwhile. */
  open(ws: WebSocket, current: TransactionView): void {
    this.ws = ws;
    ws.on('pong', () => (this.alive = true));
    ws.on('message', () => (this.lastActivity = Date.now())); // clients have nothing to say; it still counts as activity
    ws.on('error', () => ws.terminate());
    ws.once('close', () => this.end());
    if (this.ended) return void ws.terminate();
    this.feed.accept(current);
    this.send(frame('connected', current));
    const pending = this.pending;
    this.pending = [];
    for (const view of pending) this.update(view);
    if (this.feed.ended) ws.close(CLOSE_COMPLETE, 'transaction complete');
  }

  tick(now: number): void {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    if (!this.alive) return void ws.terminate(); // no pong since the last ping: the peer is gone
    if (now - this.lastActivity > this.limits.idleMs) return void ws.close(CLOSE_GOING_AWAY, 'idle timeout');
    this.alive = false;
    ws.ping();
  }

  shutdown(): void {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.close(CLOSE_SERVICE_RESTART, 'server restarting: reconnect');
    else if (this.ws) this.ws.terminate();
    else this.end();
  }

  /** Stops following (the handshake failed, or the socket closed); runs once. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.pending = [];
    this.stopListening();
    this.onEnd(this);
  }

  private update(view: TransactionView, encoded?: string): void {
    if (this.ended) return;
    if (!this.ws) {
      this.pending.push(view);
      return;
    }
    if (this.feed.ended || !this.feed.accept(view)) return;
    this.send(encoded ?? frame('update', view));
    if (this.feed.ended) this.ws.close(CLOSE_COMPLETE, 'transaction complete');
  }

  private send(data: string): void {
    const ws = this.ws!;
    if (ws.readyState !== WebSocket.OPEN) return;
    // A reader that does not keep up would make the server hold every frame for it: drop it instead.
    if (ws.bufferedAmount + data.length > this.limits.maxBufferedBytes) return void ws.terminate();
    ws.send(data);
    this.lastActivity = Date.now();
  }
}
