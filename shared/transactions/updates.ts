import type { Knex } from 'knex';
import type { Redis } from '../redis/client';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { findTransactions } from './repo';
import type { TransactionRow } from './row';
import { presentTransaction, type TransactionView } from './service';

/**
 * Live transaction updates (docs/api.md#transactions): whoever moves a transaction publishes its REST body on one Redis
 * channel once the change has committed; every web process subscribes once and fans it out to its sockets.
 * PostgreSQL stays the source of truth: a lost message costs a live client one frame, never state (the web
 * re-reads what it follows after a Redis reconnect, and the REST route always answers).
 */
export interface TransactionUpdateMessage {
  readonly transaction: TransactionView;
}

export interface UpdateDeps {
  readonly db: Knex;
  readonly redis: Redis;
  readonly config: Pick<Config, 'redis'>;
  readonly log: Logger;
}

export const transactionUpdatesChannel = (redisPrefix: string) => `${redisPrefix}:transactions:updates`;

/** The REST bodies of these transactions, read in one query (unknown ids are left out). */
export async function loadTransactionViews(db: Knex, ids: readonly string[]): Promise<TransactionView[]> {
  return (await findTransactions(db, ids)).map(presentTransaction);
}

/**
 * Publishes the current state of several transactions (a batch's items). Never throws: the change is
 * already durable, and a failed publish must not fail or retry the work that made it.
 */
export async function publishTransactionUpdates(app: UpdateDeps, transactionIds: readonly string[]): Promise<void> {
  if (!transactionIds.length) return;
  await publishing(app, transactionIds.length, async () => loadTransactionViews(app.db, transactionIds));
}

/** Publishes rows the caller has just read or written (after their commit), without reading them again. */
export async function publishTransactionRows(app: UpdateDeps, rows: readonly TransactionRow[]): Promise<void> {
  if (!rows.length) return;
  await publishing(app, rows.length, async () => rows.map(presentTransaction));
}

/**
 * Publishes through the node of the channel's slot, all of a call's messages in one go. On a Redis Cluster a plain
 * PUBLISH goes to any node and reaches the subscribers through the cluster bus from there, so two updates sent
 * one after the other through two nodes can arrive in either order, and a live client's feed, which drops a state
 * older than the last it sent (web/ws/feed.ts), would miss a step. A script keyed by the channel (which carries
 * the service's hash tag) runs on one node for every publisher: one node, one order. On one server it is a PUBLISH.
 */
const PUBLISH_IN_ORDER = `for i = 1, #ARGV do redis.call('PUBLISH', KEYS[1], ARGV[i]) end
return #ARGV`;

type Publisher = Redis & { worksPublishInOrder(channel: string, ...messages: string[]): Promise<number> };

function publisher(redis: Redis): Publisher {
  if (!('worksPublishInOrder' in redis)) redis.defineCommand('worksPublishInOrder', { numberOfKeys: 1, lua: PUBLISH_IN_ORDER });
  return redis as Publisher;
}

async function publishing(app: UpdateDeps, count: number, viewsOf: () => Promise<TransactionView[]>): Promise<void> {
  try {
    const views = await viewsOf();
    const channel = transactionUpdatesChannel(app.config.redis.prefix);
    const messages = views.map((transaction) => JSON.stringify({ transaction } satisfies TransactionUpdateMessage));
    await publisher(app.redis).worksPublishInOrder(channel, ...messages);
  } catch (err) {
    app.log.warn({ err: { message: (err as Error).message }, transactions: count }, 'could not publish a transaction update');
  }
}

/** The message's transaction, or undefined when the payload is not one (a foreign publisher, a bad version). */
export function parseTransactionUpdate(message: string): TransactionView | undefined {
  try {
    const parsed = JSON.parse(message) as Partial<TransactionUpdateMessage>;
    const tx = parsed?.transaction;
    return tx && typeof tx.transaction_id === 'string' && Array.isArray(tx.steps) ? tx : undefined;
  } catch {
    return undefined;
  }
}
