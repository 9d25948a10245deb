import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Principal } from '../api-keys/types';
import { notFound } from '../errors';
import type { PreparedQuote } from '../registration/types';
import { findTransaction, insertTransaction, type TransactionRow } from './repo';
import { enterStep, STEP_PROGRESS } from './steps';

/** Records a confirmed quote as a pending transaction; the registration's ats_id is allocated here. */
export async function createTransaction(trx: Knex.Transaction, quote: PreparedQuote, apiKeyId: string): Promise<string> {
  const id = randomUUID();
  const session = quote.session;
  let atsId = session.atsId ?? null;
  if (session.kind === 'register') {
    const [row] = await trx('ats_counters').where({ network: session.network }).increment('next_id', 1).returning('next_id');
    atsId = Number(row.next_id) - 1;
  }
  await insertTransaction(trx, {
    id,
    jobId: session.jobId,
    organizationId: session.organizationId,
    apiKeyId,
    network: session.network,
    type: session.kind,
    currentStep: 'validating',
    steps: enterStep([], 'validating'),
    quote,
    priceCredits: quote.price.total_price_credits,
    atsId,
    workId: session.workId ?? null,
    externalUserRef: session.externalUserRef,
  });
  return id;
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
 * is simply not found (contract §1: existence does not leak).
 */
export async function getTransaction(db: Knex, principal: Principal, id: string): Promise<TransactionView> {
  const tx = /^[0-9a-f-]{36}$/i.test(id) ? await findTransaction(db, id) : undefined;
  if (!tx || tx.organizationId !== principal.organizationId) throw notFound('Transaction');
  if (principal.kind === 'session' && tx.externalUserRef !== principal.externalUserRef) throw notFound('Transaction');
  return presentTransaction(tx);
}
