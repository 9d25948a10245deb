import type { Knex } from 'knex';
import type { Job } from 'bullmq';
import type { Config, Network } from '../config';
import type { Queues } from '../queue/queues';
import type { ChainConnections } from '../chain/connections';
import { relayerAddress } from '../chain/keys';
import { openTransactionCounts } from '../transactions/repo';
import { relayerFeesSince } from '../transactions/submissions-repo';
import type { TransactionStatus } from '../transactions/steps';
import { deadDeliveryCount } from '../webhooks/repo';
import { withTimeout } from '../timeout';

/** What the state read uses: the web's handles. */
export interface StateDeps {
  readonly db: Knex;
  readonly queues: Queues;
  readonly chains: ChainConnections;
  readonly config: Pick<Config, 'chains'>;
}

export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed', 'prioritized', 'completed'] as const;
export const OPEN_STATUSES = ['pending', 'submitted', 'in_block'] as const satisfies readonly TransactionStatus[];

/**
 * The relayer's rate of fees is what it paid in the blocks of this window (the last 600 blocks: an hour at 6 s
 * a block) divided by its length; the free balance over that rate is how many blocks of fees it still covers.
 */
export const FEE_WINDOW_BLOCKS = 600;

/** The longest any one part of the state is waited for: a dependency away costs a scrape this much at most. */
const PART_TIMEOUT_MS = 3000;

export interface QueueState {
  readonly queue: string;
  readonly counts: Readonly<Record<(typeof QUEUE_STATES)[number], number>>;
  /** Seconds the oldest waiting job has waited (0 when none waits). */
  readonly oldestWaitingAgeSeconds: number;
}

export interface ChainState {
  readonly network: Network;
  readonly connected: boolean;
  /** Best − finalized block number; absent when the node could not be read. */
  readonly headLagBlocks?: number;
  /** The relayer's free balance in token units; absent when the node could not be read. */
  readonly relayerFree?: number;
  /** Blocks of fees the free balance covers at the recent rate; absent when no fee was paid in the window, or unread. */
  readonly feeBlocksCovered?: number;
}

/**
 * What the operators' gauges show, read at scrape time. Each part is read on its own, bounded: a dependency
 * that is away leaves its part out (Redis: the queues; PostgreSQL: transactions and dead letters; a node: its
 * heads and balance) and never fails the whole.
 */
export interface OperationsState {
  /** The queues that could be read. */
  readonly queues: readonly QueueState[];
  /** Every configured network × non-terminal status, 0 included; absent when PostgreSQL could not be read. */
  readonly openTransactions?: readonly { network: Network; status: (typeof OPEN_STATUSES)[number]; count: number }[];
  /** Per configured network, the age of its oldest non-terminal transaction (0 when none). */
  readonly oldestOpenAgeSeconds?: readonly { network: Network; seconds: number }[];
  readonly deadLetters?: number;
  /** Every configured network. */
  readonly chains: readonly ChainState[];
}

/** Reads the state: `read()` once per call; `sharedRead` (shared-read.ts) bounds how often. */
export function stateReader(deps: StateDeps): () => Promise<OperationsState> {
  // the relayers' addresses, derived from their seeds at the first read
  const relayers = new Map<Network, Promise<string>>();
  const relayerOf = ({ network, relayerSeed, ss58Prefix }: Config['chains'][number]) => {
    if (!relayers.has(network)) relayers.set(network, relayerAddress(relayerSeed, ss58Prefix));
    return relayers.get(network)!;
  };
  return async () => {
    const [queues, transactions, deadLetters, chains] = await Promise.all([
      Promise.all(Object.entries(deps.queues).map(([name, queue]) => part(queueState(name, queue)))),
      part(cancelled(deps.db, openTransactionCounts)),
      part(cancelled(deps.db, deadDeliveryCount)),
      Promise.all(deps.config.chains.map((chain) => chainState(deps, chain.network, relayerOf(chain)))),
    ]);
    const networks = deps.config.chains.map((c) => c.network);
    return {
      queues: queues.filter((q): q is QueueState => q !== undefined),
      ...(transactions && {
        openTransactions: networks.flatMap((network) =>
          OPEN_STATUSES.map((status) => ({
            network,
            status,
            count: transactions.find((t) => t.network === network && t.status === status)?.count ?? 0,
          })),
        ),
        oldestOpenAgeSeconds: networks.map((network) => ({
          network,
          seconds: Math.max(0, ...transactions.filter((t) => t.network === network).map((t) => t.oldestAgeSeconds)),
        })),
      }),
      ...(deadLetters !== undefined && { deadLetters }),
      chains,
    };
  };
}

/**
 * A scrape's query, cancelled by PostgreSQL itself past the part's time (or while it waits for a lock): one only
 * abandoned here would go on holding a pooled connection, and a table locked for long (a migration, a REINDEX)
 * would take one more connection from the web's requests at every scrape.
 */
function cancelled<T>(db: Knex, query: (db: Knex) => Promise<T>): Promise<T> {
  return db.transaction(async (trx) => {
    await trx.raw(`SET LOCAL statement_timeout = ${PART_TIMEOUT_MS}`);
    await trx.raw(`SET LOCAL lock_timeout = ${PART_TIMEOUT_MS}`);
    return query(trx);
  });
}

/** A part of the state, or undefined when its dependency did not answer in time. */
function part<T>(reading: Promise<T>): Promise<T | undefined> {
  return withTimeout(reading, PART_TIMEOUT_MS, 'timed out').catch(() => undefined);
}

/** Waiting jobs looked at for the oldest one not yet attempted. */
const OLDEST_LOOKED_AT = 20;

async function queueState(queue: string, q: Queues[keyof Queues]): Promise<QueueState> {
  const [counts, head] = await Promise.all([q.getJobCounts(...QUEUE_STATES), q.getWaiting(0, OLDEST_LOOKED_AT - 1)]);
  // A job waiting after a failed attempt has no record of when it came back from its backoff (BullMQ keeps when
  // the last attempt began, not when the wait ended), so its age would count the retry schedule as waiting: the
  // oldest first attempt at the head of the queue is what tells a queue nobody works.
  const oldest = head.filter((job: Job) => job.attemptsMade === 0).sort((a, b) => waitingSince(a) - waitingSince(b))[0];
  return {
    queue,
    counts: Object.fromEntries(QUEUE_STATES.map((s) => [s, counts[s] ?? 0])) as QueueState['counts'],
    oldestWaitingAgeSeconds: oldest ? Math.max(0, (Date.now() - waitingSince(oldest)) / 1000) : 0,
  };
}

/** When a job not yet attempted began to wait: when it was added, after its delay. */
function waitingSince(job: Job): number {
  return job.timestamp + (job.opts.delay ?? 0);
}

async function chainState(deps: StateDeps, network: Network, relayer: Promise<string>): Promise<ChainState> {
  const address = await relayer.catch(() => undefined);
  const { connected, bestBlock, finalizedBlock, free } = await deps.chains.vitals(network, address, PART_TIMEOUT_MS);
  if (bestBlock === undefined || finalizedBlock === undefined) return { network, connected };
  const fees = free ? await part(cancelled(deps.db, (db) => relayerFeesSince(db, network, bestBlock - FEE_WINDOW_BLOCKS))) : undefined;
  return {
    network,
    connected,
    headLagBlocks: Math.max(0, bestBlock - finalizedBlock),
    ...(free && { relayerFree: free.tokens }),
    // free ÷ (fees ÷ window), in planck
    ...(free && fees && { feeBlocksCovered: (Number(free.planck) * FEE_WINDOW_BLOCKS) / Number(fees) }),
  };
}
