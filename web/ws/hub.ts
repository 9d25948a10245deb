import type { Resources } from '../../shared/resources';
import { subscribe, type Subscription } from '../../shared/redis/subscriber';
import type { TransactionView } from '../../shared/transactions/service';
import { loadTransactionViews, parseTransactionUpdate, transactionUpdatesChannel } from '../../shared/transactions/updates';
import { frame } from './feed';

/** Receives a transaction's new state, with its `update` frame already encoded (once for all sockets). */
export type UpdateListener = (view: TransactionView, updateFrame: string) => void;

/** Most transactions one resync reads per query after a Redis reconnect. */
const RESYNC_CHUNK = 500;

/**
 * The web process's one subscriber connection to the transaction updates channel, fanning each message out
 * to the local sockets following that transaction. Messages published while Redis was away are lost, so
 * after a reconnect every followed transaction is read again from PostgreSQL once (not per socket).
 */
export class TransactionUpdatesHub {
  private readonly listeners = new Map<string, Set<UpdateListener>>();
  private readonly subscription: Subscription;

  constructor(private readonly app: Resources) {
    this.subscription = subscribe(
      app.config.redis,
      'works-api:live-updates',
      transactionUpdatesChannel(app.config.redis.prefix),
      {
        message: (message) => this.onMessage(message),
        // read PostgreSQL once the new SUBSCRIBE is on its way
        resubscribing: () => setImmediate(() => void this.resync()),
      },
      app.redis,
    );
    void this.subscription.subscribed.then((ok) => {
      if (!ok) app.log.warn('live updates: could not subscribe');
    });
  }

  /** Resolves once the subscription is active, or after `timeoutMs` (a reconnect then resyncs). */
  async whenSubscribed(timeoutMs = 2000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    return Promise.race([this.subscription.subscribed, timeout]).finally(() => clearTimeout(timer));
  }

  /** Follows a transaction; the returned function stops following it. */
  listen(transactionId: string, listener: UpdateListener): () => void {
    let set = this.listeners.get(transactionId);
    if (!set) this.listeners.set(transactionId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(transactionId) === set) this.listeners.delete(transactionId);
    };
  }

  /** How many transactions this process follows (for the benchmark and metrics). */
  get followed(): number {
    return this.listeners.size;
  }

  close(): void {
    this.listeners.clear();
    this.subscription.close();
  }

  private onMessage(message: string): void {
    // every transaction's every step reaches every web process: none read when no socket here follows any
    if (this.listeners.size === 0) return;
    const view = parseTransactionUpdate(message);
    if (view) this.dispatch(view);
  }

  private dispatch(view: TransactionView): void {
    const set = this.listeners.get(view.transaction_id);
    if (!set) return;
    const encoded = frame('update', view);
    for (const listener of [...set]) {
      try {
        listener(view, encoded);
      } catch (err) {
        this.app.log.error({ err, transaction_id: view.transaction_id }, 'live updates: a listener failed');
      }
    }
  }

  private async resync(): Promise<void> {
    const ids = [...this.listeners.keys()];
    try {
      for (let i = 0; i < ids.length; i += RESYNC_CHUNK) {
        for (const view of await loadTransactionViews(this.app.db, ids.slice(i, i + RESYNC_CHUNK))) this.dispatch(view);
      }
      if (ids.length) this.app.log.info({ transactions: ids.length }, 'live updates: resynced after a Redis reconnect');
    } catch (err) {
      this.app.log.warn({ err: { message: (err as Error).message } }, 'live updates: resync failed');
    }
  }
}
