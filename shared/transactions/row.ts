import type { Network } from '../config';
import type { AnchorPayload } from './anchor';
import type { Step, StepName, TransactionStatus } from './steps';
import type { TransactionLabels } from '../queue/labels';

/* A transaction as the code sees it, and the mapping from its row (the SQL is repo.ts's). */

/** A transaction the reconciler may enqueue again: its chain job's labels (queue/labels.ts) and its trace. */
export type StuckTransaction = TransactionLabels & { readonly traceparent: string | null };

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
  /** The trace it belongs to (W3C traceparent of its confirm), when the confirming process traced. */
  readonly traceparent: string | null;
}

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

/** The columns `toTransaction` reads. */
export const ROW_COLUMNS = [
  'id',
  'organization_id',
  'api_key_id',
  'network',
  'type',
  'status',
  'current_step',
  'steps',
  'anchor',
  'price_credits',
  'ats_id',
  'version',
  'work_id',
  'external_user_ref',
  'call_hex',
  'submission_id',
  'batch_index',
  'tx_hash',
  'signings',
  'block_hash',
  'block_number',
  'extrinsic_index',
  'result',
  'finalized_at',
  'created_at',
  'updated_at',
  'traceparent',
] as const;

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
  traceparent: r.traceparent ?? null,
});

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
  readonly traceparent: string | null;
}

/** An organization's transaction as support reads it (the operator CLI). */
export type ActivityRow = Pick<TransactionRow, 'id' | 'type' | 'network' | 'status' | 'currentStep' | 'atsId' | 'version' | 'result'> &
  Pick<TransactionRow, 'externalUserRef' | 'createdAt' | 'finalizedAt'>;

export type TransactionCount = { type: TransactionRow['type']; status: TransactionStatus; reason: string | null; count: number };

/** Per network and status, the transactions not yet terminal: how many, and the oldest's age in seconds. */
export type OpenTransactionCount = { network: Network; status: TransactionStatus; count: number; oldestAgeSeconds: number };
