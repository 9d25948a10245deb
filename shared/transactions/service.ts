import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Principal } from '../api-keys/types';
import { notFound } from '../errors';
import type { Network } from '../config';
import type { AnchorPayload } from './anchor';
import { findTransaction, insertTransaction, type TransactionRow } from './repo';
import { allocateAtsId } from './ats-counters-repo';
import { enterStep, STEP_PROGRESS } from './steps';

/** A confirmed quote, as the transaction it becomes (mapped once, at confirm). */
export interface NewTransaction {
  readonly jobId: string;
  readonly kind: 'register' | 'add_version';
  readonly organizationId: string;
  readonly apiKeyId: string;
  readonly network: Network;
  readonly anchor: AnchorPayload;
  readonly priceCredits: number;
  readonly externalUserRef: string | null;
  /** Versions only: the work and its registration id. */
  readonly workId?: string;
  readonly atsId?: number;
  /** The trace the confirm runs in (telemetry/tracing.ts), kept for every later step. */
  readonly traceparent?: string | null;
}

/**
 * The ats_id a confirm records: a registration's is taken from the network's counter in a statement of its own,
 * committed at once, before the confirm's SQL transaction begins, so the counter's row lock lasts that one
 * statement. Taken inside, it lasted the whole debit, every round trip to the web included, and every confirm of
 * every organization queued behind it (34 confirms a second under the pipeline bench). A confirm that then fails
 * leaves its id unused, as a failed registration always has: ats_ids are unique and increasing, not gapless.
 * A version carries its work's.
 */
export async function atsIdFor(db: Knex, input: Pick<NewTransaction, 'kind' | 'network' | 'atsId'>): Promise<number | null> {
  return input.kind === 'register' ? allocateAtsId(db, input.network) : (input.atsId ?? null);
}

/** Records a confirmed quote as a pending transaction, with the ats_id `atsIdFor` gave it. */
export async function createTransaction(trx: Knex.Transaction, input: NewTransaction, atsId: number | null): Promise<TransactionRow> {
  const id = randomUUID();
  return insertTransaction(trx, {
    id,
    jobId: input.jobId,
    organizationId: input.organizationId,
    apiKeyId: input.apiKeyId,
    network: input.network,
    type: input.kind,
    steps: enterStep([], 'validating'),
    anchor: input.anchor,
    priceCredits: input.priceCredits,
    atsId,
    workId: input.workId ?? null,
    externalUserRef: input.externalUserRef,
    traceparent: input.traceparent ?? null,
  });
}

export interface TransactionView {
  readonly transaction_id: string;
  readonly transaction_type: 'register' | 'add_version';
  readonly network: string;
  readonly status: string;
  readonly current_step: string;
  readonly progress: number;
  readonly is_complete: boolean;
  readonly steps: { name: string; status: string; at: string }[];
  readonly result: Record<string, unknown> | null;
  readonly created_at: string;
  readonly updated_at: string;
}

export function presentTransaction(tx: TransactionRow): TransactionView {
  return {
    transaction_id: tx.id,
    transaction_type: tx.type,
    network: tx.network,
    status: tx.status,
    current_step: tx.currentStep,
    progress: STEP_PROGRESS[tx.currentStep],
    is_complete: tx.status === 'finalized' || tx.status === 'failed',
    steps: tx.steps.map(({ name, status, at }) => ({ name, status, at })),
    result: tx.result,
    created_at: tx.createdAt.toISOString(),
    updated_at: tx.updatedAt.toISOString(),
  };
}

/**
 * A transaction as its organization sees it. Another organization's, or one outside a session's ref,
 * is simply not found (docs/api.md#errors: existence does not leak).
 */
export async function getTransaction(db: Knex, principal: Principal, id: string): Promise<TransactionView> {
  const tx = /^[0-9a-f-]{36}$/i.test(id) ? await findTransaction(db, id) : undefined;
  if (!tx || tx.organizationId !== principal.organizationId) throw notFound('Transaction');
  if (principal.kind === 'session' && tx.externalUserRef !== principal.externalUserRef) throw notFound('Transaction');
  return presentTransaction(tx);
}
