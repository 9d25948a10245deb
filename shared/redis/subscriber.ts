import { Cluster, Redis as Server } from 'ioredis';
import { createRedis, type Redis } from './client';
import type { ClusterSeed, RedisSettings } from './settings';

export interface Subscription {
  /** Resolves once the first subscription is active: true, or false if it could not be made. */
  readonly subscribed: Promise<boolean>;
  close(): void;
}

export interface SubscriptionHandlers {
  message(message: string): void;
  /**
   * The subscription was lost and is being made again: what was published meanwhile is gone. Called as the
   * new connection is ready, before its SUBSCRIBE is answered (so nothing published after this call is missed).
   */
  resubscribing(): void;
}

/** Failed reconnects to one cluster node before the subscription moves to another. */
const ATTEMPTS_PER_NODE = 3;
/**
 * A subscribed connection sends nothing, so a link lost without a reset (a host gone) would go unnoticed for
 * the system's keep-alive time (hours): it is PINGed this often, and reconnected when no answer comes in time.
 */
const PING_EVERY_MS = 15_000;
const PING_TIMEOUT_MS = 5_000;

function keepChecked(connection: Redis): () => void {
  const timer = setInterval(() => {
    if (connection.status !== 'ready') return;
    let timeout: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => (timeout = setTimeout(() => reject(new Error('no answer')), PING_TIMEOUT_MS)));
    Promise.race([connection.ping(), late])
      .catch(() => connection.disconnect(true))
      .finally(() => clearTimeout(timeout));
  }, PING_EVERY_MS).unref();
  return () => clearInterval(timer);
}

/**
 * One connection subscribed to `channel`. On one server: that server, reconnecting for ever. On a cluster a
 * PUBLISH reaches every node, so any node will do: it subscribes on one, and when that one stays away it moves
 * on to the next node `cluster` knows of (ioredis's own cluster subscriber moves too, but silently, so a
 * caller could not tell that it missed messages).
 */
export function subscribe(
  settings: RedisSettings,
  name: string,
  channel: string,
  handlers: SubscriptionHandlers,
  cluster?: Redis,
): Subscription {
  let closed = false;
  let readyBefore = false;
  const wire = (connection: Redis): Promise<boolean> => {
    connection.on('message', (from: string, message: string) => {
      if (from === channel) handlers.message(message);
    });
    connection.on('ready', () => {
      if (readyBefore) handlers.resubscribing();
      readyBefore = true;
    });
    return connection.subscribe(channel).then(
      () => true,
      () => false,
    );
  };

  if (!settings.cluster) {
    const connection = createRedis(settings, 'worker', name);
    const unchecked = keepChecked(connection);
    const close = () => {
      unchecked();
      connection.disconnect();
    };
    return { subscribed: wire(connection), close };
  }

  const { tls, username, password } = settings.cluster;
  const nodes = (): ClusterSeed[] => {
    const known = cluster instanceof Cluster ? cluster.nodes('all').map((n) => ({ host: n.options.host!, port: n.options.port! })) : [];
    return known.length ? known : [...settings.cluster!.seeds];
  };
  let turn = 0;
  let failures = 0;
  let current: Server;
  let unchecked = () => undefined as void;
  const connect = (): Promise<boolean> => {
    const all = nodes();
    const node = all[turn++ % all.length]!;
    current = new Server({
      ...node,
      connectionName: name,
      ...(tls ? { tls: {} } : {}),
      ...(username ? { username } : {}),
      ...(password ? { password } : {}),
      maxRetriesPerRequest: null,
      retryStrategy: (attempt) => (attempt > ATTEMPTS_PER_NODE ? null : attempt * 200),
    });
    current.on('error', () => undefined);
    current.on('ready', () => (failures = 0));
    unchecked = keepChecked(current);
    current.once('end', () => {
      unchecked();
      // every node away: each next one is tried a little later, up to 2 s apart
      if (!closed) setTimeout(() => void (closed || connect()), Math.min(2000, 200 * failures++)).unref();
    });
    return wire(current);
  };
  return {
    subscribed: connect(),
    close() {
      closed = true;
      unchecked();
      current.disconnect();
    },
  };
}
