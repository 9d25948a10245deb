import type { Knex } from 'knex';
import { Cluster, type Redis as Server } from 'ioredis';
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
 * The connection updates are published through. On a Redis Cluster a PUBLISH may go to any node, which sends it
 * on to the others: two updates published in turn through two nodes could reach a subscriber swapped, and its
 * feed would drop the older (web/ws/feed.ts). Every update goes through one node instead, the same in every
 * process (the master first by address): a node sends messages on in the order it took them.
 */
export function publisherOf(redis: Redis): Redis | Server {
  if (!(redis instanceof Cluster)) return redis;
  const address = (node: Server) => `${node.options.host}:${node.options.port}`;
  const masters = redis.nodes('master');
  return masters.length ? masters.reduce((first, node) => (address(node) < address(first) ? node : first)) : redis;
}

async function publishing(app: UpdateDeps, count: number, viewsOf: () => Promise<TransactionView[]>): Promise<void> {
  try {
    const views = await viewsOf();
    const channel = transactionUpdatesChannel(app.config.redis.prefix);
    const message = (transaction: TransactionView) => JSON.stringify({ transaction } satisfies TransactionUpdateMessage);
    const publisher = publisherOf(app.redis);
    // one update (a confirm, a job's step) needs no pipeline, whose making copies every script of the connection
    if (views.length === 1) return void (await publisher.publish(channel, message(views[0]!)));
    const pipeline = publisher.pipeline();
    for (const transaction of views) pipeline.publish(channel, message(transaction));
    const results = await pipeline.exec();
    const failed = results?.find(([err]) => err)?.[0];
    if (failed) throw failed;
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
