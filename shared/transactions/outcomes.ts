import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Config } from '../config';
import type { SecretBox } from '../crypto/secret-box';
import { findWallet } from '../organizations/repo';
import { appendLedgerEntry } from '../ledger/service';
import { recordEvent } from '../webhooks/service';
import { indexFinalizedVersion } from '../works/indexing';
import { explorerUrl } from '../chain/explorer';
import { findTransaction, findTransactions, updateTransaction, type TransactionRow } from './repo';
import { enterStep } from './steps';
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

type Inclusion = { readonly blockHash: string; readonly blockNumber: number; readonly index: number };

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
 * enqueues and publishes, for all of them), each with the same statements as alone. Should that SQL transaction
 * fail (a version out of turn, a deadlock), each is finalized alone, so that one transaction's failure is its own.
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
      for (const tx of rows) each.set(tx.id, await finalizeWithin(trx, deps, tx, finalizedAt));
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

/** One transaction's finalization (its row locked), inside the group's SQL transaction; what to carry out once it commits. */
async function finalizeWithin(trx: Knex.Transaction, deps: OutcomeDeps, tx: TransactionRow, finalizedAt: Date): Promise<Effects> {
  // already terminal: a rerun after a crash between commit and effects publishes and asks for the certificate again
  if (tx.status === 'failed') return effects({ publishedRows: [tx] });
  if (tx.status === 'finalized') return effects({ publishedRows: [tx], certificates: [{ workId: tx.workId!, version: tx.version! }] });
  const inclusion = includedBlock(tx);
  const registering = tx.type === 'register';
  const workId = registering ? tx.anchor.jobId : tx.workId!;
  const version = registering ? 1 : tx.version!;
  const accessCode = registering && !tx.externalUserRef ? `atc_${randomBytes(32).toString('hex')}` : undefined;
  await indexVersion(trx, tx, { workId, version, inclusion, finalizedAt, accessCode });
  const result = successResult(deps, tx, { workId, version, inclusion, finalizedAt });
  const finalized = await markFinalized(trx, tx, result, finalizedAt);
  const delivery = await recordEvent(trx, deps.box, {
    ...eventOf(tx),
    type: registering ? 'work_registered' : 'work_updated',
    payload: {
      event: registering ? 'work_registered' : 'work_updated',
      transaction_id: tx.id,
      organization_id: tx.organizationId,
      api_key_id: tx.apiKeyId,
      external_user_ref: tx.externalUserRef,
      network: tx.network,
      ats_id: tx.atsId,
      tx_hash: tx.txHash,
      block_number: result.block_number,
      block_hash: result.block_hash,
      access_code: null,
      explorer_url: result.explorer_url,
      finalized_at: result.finalized_at,
      // docs/api.md#events: work_updated is work_registered's fields plus the version
      ...(registering ? {} : { version }),
    },
    accessCode,
  });
  return effects({
    deliveries: delivery ? [{ ...delivery, traceparent: tx.traceparent }] : [],
    publishedRows: [finalized],
    certificates: [{ workId, version }],
    settled: [settlement(tx, 'finalized', finalizedAt)],
  });
}

/** The block recorded when the batch was included, now final and canonical. */
function includedBlock(tx: TransactionRow): Inclusion {
  if (tx.blockHash === null || tx.blockNumber === null || tx.extrinsicIndex === null)
    throw new Error(`transaction ${tx.id} has no block to finalize`);
  return { blockHash: tx.blockHash, blockNumber: tx.blockNumber, index: tx.extrinsicIndex };
}

interface Placement {
  readonly workId: string;
  readonly version: number;
  readonly inclusion: Inclusion;
  readonly finalizedAt: Date;
}

async function indexVersion(trx: Knex.Transaction, tx: TransactionRow, at: Placement & { accessCode?: string }): Promise<void> {
  const wallet = await findWallet(trx, tx.organizationId, tx.network);
  const { anchor } = tx;
  await indexFinalizedVersion(trx, {
    ...anchor,
    transactionId: tx.id,
    organizationId: tx.organizationId,
    network: tx.network,
    atsId: tx.atsId!,
    workId: at.workId,
    version: at.version,
    owner: wallet!.address,
    externalUserRef: tx.externalUserRef,
    accessCodeHash: at.accessCode ? createHash('sha256').update(at.accessCode).digest() : null,
    txHash: tx.txHash!,
    blockNumber: at.inclusion.blockNumber,
    blockHash: at.inclusion.blockHash,
    extrinsicIndex: at.inclusion.index,
    finalizedAt: at.finalizedAt,
  });
}

/** The transaction's `result` on success (docs/api.md#transactions). */
function successResult(deps: OutcomeDeps, tx: TransactionRow, at: Placement) {
  return {
    ats_id: tx.atsId,
    version: at.version,
    work_id: at.workId,
    tx_hash: tx.txHash,
    block_number: at.inclusion.blockNumber,
    block_hash: at.inclusion.blockHash,
    explorer_url: explorerUrl(deps.config.chains, tx.network, at.inclusion),
    finalized_at: at.finalizedAt.toISOString(),
  };
}

async function markFinalized(
  trx: Knex.Transaction,
  tx: TransactionRow,
  result: ReturnType<typeof successResult>,
  finalizedAt: Date,
): Promise<TransactionRow> {
  const row = await updateTransaction(
    trx,
    tx.id,
    {
      status: 'finalized',
      current_step: 'completed',
      steps: enterStep(tx.steps, 'completed', finalizedAt),
      block_hash: result.block_hash,
      block_number: result.block_number,
      extrinsic_index: tx.extrinsicIndex,
      work_id: result.work_id,
      version: result.version,
      result,
      finalized_at: finalizedAt,
    },
    true,
  );
  return row!;
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

/** What an outcome's event carries of its transaction, besides its type and payload. */
const eventOf = (tx: TransactionRow) => ({
  transactionId: tx.id,
  organizationId: tx.organizationId,
  apiKeyId: tx.apiKeyId,
  traceparent: tx.traceparent,
  confirmedAt: tx.createdAt,
});

const settlement = (tx: TransactionRow, status: Settlement['status'], settledAt: Date): Settlement => ({
  network: tx.network,
  type: tx.type,
  status,
  confirmedAt: tx.createdAt,
  settledAt,
});
