import type { Knex } from 'knex';
import type { Network } from '../config';
import type { PreparedQuote } from '../registration/types';
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
  readonly quote: PreparedQuote;
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
  quote: r.quote,
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

/** Column updates in their snake_case names; `updated_at` is always moved. */
/** The transaction a job was confirmed into, if it was (one per job id). */
export async function transactionIdForJob(db: Knex | Knex.Transaction, jobId: string): Promise<string | undefined> {
  const row = await db('transactions').where({ job_id: jobId }).first('id');
  return row?.id;
}

export async function updateTransaction(db: Knex | Knex.Transaction, id: string, changes: Record<string, unknown>): Promise<void> {
  const values = { ...changes, updated_at: db.fn.now() };
  if ('steps' in values) values.steps = JSON.stringify(values.steps);
  if ('result' in values && values.result !== null) values.result = JSON.stringify(values.result);
  await db('transactions').where({ id }).update(values);
}
