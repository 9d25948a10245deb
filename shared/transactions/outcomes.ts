import type { Knex } from 'knex';
import type { Config } from '../config';
import type { SecretBox } from '../crypto/secret-box';
import { appendLedgerEntry } from '../ledger/service';
import { recordEvent, recordEvents } from '../webhooks/service';
import { indexFinalizedVersions } from '../works/indexing';
import { findTransaction, findTransactions, updateTransaction, updateTransactions, type TransactionRow } from './repo';
import { enterStep } from './steps';
import { eventOf, planFinalization, type PlannedFinalization } from './finalization';
import { afterCommit, effects, mergeEffects, type EffectDeps, type Effects } from './effects';
import { Coalescer } from '../coalesce';
import type { Settlement } from '../metrics/events';

// The two ends of a confirmed transaction: finalized and indexed, or failed and refunded.

export interface OutcomeDeps extends EffectDeps {
  readonly db: Knex;
  readonly box: SecretBox;
  readonly config: Pick<Config, 'redis' | 'webhooks' | 'chains'>;
}

/** What carrying a transaction to its end uses: the outcomes' handles and the chain settings. */
export interface TransactionDeps extends OutcomeDeps {
  readonly config: Pick<
    Config,
    'redis' | 'webhooks' | 'chains' | 'chainBatchMax' | 'chainBatchIntervalMs' | 'chainGiveUpAfterSeconds' | 'chainForgetOnNewGenesis'
  >;
}

/** A finalization's answer for one transaction of a group: its row as finalization left it, or why it failed. */
type Finalized = { readonly row: TransactionRow } | { readonly error: unknown };

/** At most this many transactions finalized in one SQL transaction. */
const FINALIZED_TOGETHER_MAX = 100;

/** Per process's deps: the finalizations asked for while one is under way, gathered for the next (coalesce.ts). */
const groups = new WeakMap<OutcomeDeps, Coalescer<string, Finalized>>();

/**
 * Finalizes a transaction whose block is final and canonical: indexes the version, marks the transaction
 * finalized and records its event, in one SQL transaction; then delivers, publishes and asks for the
 * certificate. A transaction already terminal is left as it is (its effects are carried out again).
 *
 * A block's transactions reach finality together (hundreds at once in a burst): those asked for while a
 * finalization is under way go together in the next, in one SQL transaction (one commit, and one round of
 * enqueues and publishes, for all of them), with one statement per table for all of them (`finalizeWithin`). Should
 * that SQL transaction fail (a version out of turn, a work's ats_id taken, a deadlock), each is finalized alone, so
 * that one transaction's failure is its own.
 */
export async function finalize(deps: OutcomeDeps, transactionId: string): Promise<TransactionRow> {
  let group = groups.get(deps);
  if (!group) {
    group = new Coalescer((ids) => finalizeGroup(deps, ids), { maxBatch: FINALIZED_TOGETHER_MAX, maxInFlight: 1 });
    groups.set(deps, group);
  }
  const finalized = await group.submit(transactionId);
  if ('error' in finalized) throw finalized.error;
  return finalized.row;
}

async function finalizeGroup(deps: OutcomeDeps, ids: readonly string[]): Promise<Finalized[]> {
  const finalizedAt = new Date();
  let done: Map<string, Effects>;
  try {
    done = await deps.db.transaction(async (trx) => {
      // every row of the group read and locked in one statement, in id order, the one order of every group
      const rows = await findTransactions(trx, ids, { forUpdate: true });
      // indexed in one order too, by organization and network: a work's insert locks its organization's counter
      // (work_counts, a row per connection's shard), which two groups taking in opposite orders would deadlock on
      rows.sort((a, b) => compare(a.organizationId, b.organizationId) || compare(a.network, b.network) || compare(a.id, b.id));
      const each = new Map<string, Effects>(ids.map((id) => [id, effects({})])); // an unknown id: nothing to do
      for (const [id, done] of await finalizeWithin(trx, deps, rows, finalizedAt)) each.set(id, done);
      return each;
    });
  } catch (err) {
    if (ids.length === 1) return [{ error: err }];
    deps.log.warn(
      { err: { message: (err as Error).message }, transactions: ids.length },
      'finalization group failed: each finalized alone',
    );
    return Promise.all(
      ids.map((id) =>
        finalizeGroup(deps, [id]).then(
          ([one]) => one!,
          (error: unknown) => ({ error }),
        ),
      ),
    );
  }
  // carried out together; should they fail, each job is retried, as a transaction finalized alone would be
  await afterCommit(deps, mergeEffects([...done.values()]));
  // each row as finalization left it (terminal: nothing changes it after), not read again
  return Promise.all(ids.map(async (id) => ({ row: done.get(id)!.publishedRows[0] ?? (await findTransaction(deps.db, id))! })));
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The group's finalizations (their rows locked, in the order given), inside its SQL transaction: what to carry
 * out once it commits, by id. Those not yet terminal are indexed, marked finalized and given their events with
 * one statement each for all of them (works and their first versions, the transactions, events and deliveries).
 */
async function finalizeWithin(trx: Knex.Transaction, deps: OutcomeDeps, rows: readonly TransactionRow[], finalizedAt: Date) {
  const each = new Map<string, Effects>();
  const open: PlannedFinalization[] = [];
  for (const tx of rows) {
    // already terminal: a rerun after a crash between commit and effects publishes and asks for the certificate again
    if (tx.status === 'failed') each.set(tx.id, effects({ publishedRows: [tx] }));
    else if (tx.status === 'finalized')
      each.set(tx.id, effects({ publishedRows: [tx], certificates: [{ workId: tx.workId!, version: tx.version! }] }));
    else open.push(await planFinalization(trx, deps.config.chains, tx, finalizedAt));
  }
  if (!open.length) return each;
  const [versions, changes, events] = [open.map((p) => p.version), open.map((p) => p.changes), open.map((p) => p.event)];
  await indexFinalizedVersions(trx, versions);
  const finalized = new Map((await updateTransactions(trx, changes)).map((row) => [row.id, row]));
  if (finalized.size !== open.length) throw new Error(`finalized ${finalized.size} of ${open.length} locked transactions`);
  const deliveries = await recordEvents(trx, deps.box, events);
  open.forEach(({ tx, version }, i) => {
    const delivery = deliveries[i];
    each.set(
      tx.id,
      effects({
        deliveries: delivery ? [{ ...delivery, traceparent: tx.traceparent }] : [],
        publishedRows: [finalized.get(tx.id)!],
        certificates: [{ workId: version.workId, version: version.version }],
        settled: [settlement(tx, 'finalized', finalizedAt)],
      }),
    );
  });
  return each;
}

/**
 * Marks the transaction failed, refunds the whole debit and records work_failed, inside the caller's SQL
 * transaction; returns what to carry out once it commits (nothing when the transaction was already terminal).
 */
export async function failWithin(
  trx: Knex.Transaction,
  deps: Pick<OutcomeDeps, 'box'>,
  transactionId: string,
  reason: string,
  message: string,
): Promise<Effects> {
  const failedAt = new Date();
  const tx = await findTransaction(trx, transactionId, { forUpdate: true });
  if (!tx || tx.status === 'finalized' || tx.status === 'failed') return effects({});
  await appendLedgerEntry(trx, { organizationId: tx.organizationId, kind: 'refund', amount: tx.priceCredits, reference: tx.id, reason });
  await updateTransaction(trx, tx.id, {
    status: 'failed',
    current_step: 'failed',
    steps: enterStep(tx.steps, 'failed', failedAt),
    result: { error: { code: reason, message } },
  });
  const delivery = await recordEvent(trx, deps.box, {
    ...eventOf(tx),
    type: 'work_failed',
    payload: {
      event: 'work_failed',
      transaction_id: tx.id,
      organization_id: tx.organizationId,
      api_key_id: tx.apiKeyId,
      external_user_ref: tx.externalUserRef,
      network: tx.network,
      ats_id: tx.type === 'register' ? null : tx.atsId,
      reason,
      message,
      failed_at: failedAt.toISOString(),
    },
  });
  return effects({
    deliveries: delivery ? [{ ...delivery, traceparent: tx.traceparent }] : [],
    published: [tx.id],
    settled: [settlement(tx, 'failed', failedAt)],
  });
}

const settlement = (tx: TransactionRow, status: Settlement['status'], settledAt: Date): Settlement => ({
  network: tx.network,
  type: tx.type,
  status,
  confirmedAt: tx.createdAt,
  settledAt,
});
