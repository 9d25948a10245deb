import type { Knex } from 'knex';
import type { Network } from '../config';
import type { AnchorPayload } from './anchor';
import type { Step, StepName, TransactionStatus } from './steps';

export interface TransactionRow {
  readonly id: string;
  readonly organizationId: string;
  readonly apiKeyId: string;
  readonly network: Network;
  readonly type: 'register' | 'add_version';
  readonly status: TransactionStatus;
  readonly currentStep: StepName;
  readonly steps: Step[];
  readonly anchor: AnchorPayload;
  readonly priceCredits: number;
  readonly atsId: number | null;
  readonly version: number | null;
  readonly workId: string | null;
  readonly externalUserRef: string | null;
  /** This transaction's own call (owner signature inside), set before any batch carries it. */
  readonly callHex: string | null;
  /** The relayer extrinsic (batch) that carries the call, and the call's place in it. */
  readonly submissionId: string | null;
  readonly batchIndex: number | null;
  readonly txHash: string | null;
  /** How many relayer extrinsics have carried the call (an expired one is replaced once). */
  readonly signings: number;
  readonly blockHash: string | null;
  readonly blockNumber: number | null;
  readonly extrinsicIndex: number | null;
  readonly result: Record<string, unknown> | null;
  readonly finalizedAt: Date | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

export const toTransaction = (r: Record<string, any>): TransactionRow => ({
  id: r.id,
  organizationId: r.organization_id,
  apiKeyId: r.api_key_id,
  network: r.network,
  type: r.type,
  status: r.status,
  currentStep: r.current_step,
  steps: r.steps,
  anchor: r.anchor,
  priceCredits: Number(r.price_credits),
  atsId: num(r.ats_id),
  version: num(r.version),
  workId: r.work_id,
  externalUserRef: r.external_user_ref,
  callHex: r.call_hex,
  submissionId: r.submission_id,
  batchIndex: num(r.batch_index),
  txHash: r.tx_hash,
  signings: Number(r.signings ?? 0),
  blockHash: r.block_hash,
  blockNumber: num(r.block_number),
  extrinsicIndex: num(r.extrinsic_index),
  result: r.result,
  finalizedAt: r.finalized_at,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export async function findTransaction(db: Knex | Knex.Transaction, id: string, options: { forUpdate?: boolean } = {}): Promise<TransactionRow | undefined> {
  const query = db('transactions').where({ id }).first();
  const row = await (options.forUpdate ? query.forUpdate() : query);
  return row ? toTransaction(row) : undefined;
}

/** The transaction a job was confirmed into, if it was (one per job id). */
export async function transactionIdForJob(db: Knex | Knex.Transaction, jobId: string): Promise<string | undefined> {
  const row = await db('transactions').where({ job_id: jobId }).first('id');
  return row?.id;
}

/** Column updates in their snake_case names; `updated_at` is always moved. */
export async function updateTransaction(db: Knex | Knex.Transaction, id: string, changes: Record<string, unknown>): Promise<void> {
  const values = { ...changes, updated_at: db.fn.now() };
  if ('steps' in values) values.steps = JSON.stringify(values.steps);
  if ('result' in values && values.result !== null) values.result = JSON.stringify(values.result);
  await db('transactions').where({ id }).update(values);
}

/** A new pending transaction's row. */
export interface NewTransactionRow {
  readonly id: string;
  readonly jobId: string;
  readonly organizationId: string;
  readonly apiKeyId: string;
  readonly network: Network;
  readonly type: TransactionRow['type'];
  readonly steps: Step[];
  readonly anchor: AnchorPayload;
  readonly priceCredits: number;
  readonly atsId: number | null;
  readonly workId: string | null;
  readonly externalUserRef: string | null;
}

export async function insertTransaction(trx: Knex.Transaction, row: NewTransactionRow): Promise<void> {
  await trx('transactions').insert({
    id: row.id,
    job_id: row.jobId,
    organization_id: row.organizationId,
    api_key_id: row.apiKeyId,
    network: row.network,
    type: row.type,
    status: 'pending',
    current_step: row.steps[row.steps.length - 1]!.name,
    steps: JSON.stringify(row.steps),
    anchor: JSON.stringify(row.anchor),
    price_credits: row.priceCredits,
    ats_id: row.atsId,
    work_id: row.workId,
    external_user_ref: row.externalUserRef,
  });
}

/** The network's next registration id (`ats_counters`), taken inside the caller's transaction. */
export async function allocateAtsId(trx: Knex.Transaction, network: Network): Promise<number> {
  const [row] = await trx('ats_counters').where({ network }).increment('next_id', 1).returning('next_id');
  return Number(row.next_id) - 1;
}

/** These transactions, in one query (unknown ids are left out). */
export async function findTransactions(db: Knex, ids: readonly string[]): Promise<TransactionRow[]> {
  if (!ids.length) return [];
  return (await db('transactions').whereIn('id', [...new Set(ids)])).map(toTransaction);
}

/** Of these job ids, those confirmed into a transaction. */
export async function confirmedJobIds(db: Knex, jobIds: readonly string[]): Promise<Set<string>> {
  if (!jobIds.length) return new Set();
  return new Set((await db('transactions').whereIn('job_id', jobIds).pluck('job_id')) as string[]);
}

/** Unfinished transactions untouched for `idleSeconds`, the longest idle first. */
export async function idleUnfinishedIds(db: Knex, idleSeconds: number, limit: number): Promise<string[]> {
  return db('transactions')
    .whereIn('status', ['pending', 'submitted', 'in_block'] satisfies TransactionStatus[])
    .where('updated_at', '<', db.raw(`now() - make_interval(secs => ?)`, [idleSeconds]))
    .orderBy('updated_at')
    .limit(limit)
    .pluck('id');
}

/** The explorer link finalization announced for a transaction (its result), if any. */
export async function announcedExplorerUrl(db: Knex, transactionId: string): Promise<string | undefined> {
  const row = await db('transactions').where({ id: transactionId }).first(db.raw("result->>'explorer_url' AS url"));
  return row?.url || undefined;
}
