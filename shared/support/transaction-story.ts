import type { Knex } from 'knex';
import { AppError, notFound } from '../errors';
import { isUuid } from '../organizations/service';
import { findTransaction } from '../transactions/repo';
import { sampledIn, traceIdOf } from '../telemetry/tracing';
import { safeUrl } from '../safe-url';
import { findSubmission } from '../transactions/submissions-repo';
import { eventHistory } from '../webhooks/repo';
import { entriesFor } from '../ledger/service';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A webhook URL as the logs show one: query values redacted but for the harmless ones, and no user part. */
const redactedUrl = (url: string) => safeUrl(url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i, '$1[redacted]@'));

/**
 * One transaction's whole story for support staff (the CLI's `transaction show`): the transaction, its steps with
 * their times, the relayer extrinsic that carried it and its block, its result, the events it produced, every
 * webhook attempt, the ledger entries paying for it, and its trace id. Each part is read from the module that owns
 * its table.
 */
export async function transactionStory(db: Knex, id: string) {
  if (!isUuid(id)) throw new AppError('common.bad_request', 'a transaction id is a UUID');
  const tx = await findTransaction(db, id);
  if (!tx) throw notFound('Transaction');
  const [submission, history, ledger] = await Promise.all([
    tx.submissionId ? findSubmission(db, tx.submissionId) : undefined,
    eventHistory(db, tx.id),
    entriesFor(db, tx.organizationId, tx.id),
  ]);
  return {
    transaction: {
      id: tx.id,
      organization_id: tx.organizationId,
      api_key_id: tx.apiKeyId,
      type: tx.type,
      network: tx.network,
      status: tx.status,
      current_step: tx.currentStep,
      price_credits: tx.priceCredits,
      ats_id: tx.atsId,
      version: tx.version,
      work_id: tx.workId,
      external_user_ref: tx.externalUserRef,
      created_at: iso(tx.createdAt),
      updated_at: iso(tx.updatedAt),
      finalized_at: iso(tx.finalizedAt),
    },
    steps: tx.steps.map(({ name, status, at }) => ({ name, status, at })),
    chain: {
      tx_hash: tx.txHash,
      block_number: tx.blockNumber,
      block_hash: tx.blockHash,
      extrinsic_index: tx.extrinsicIndex,
      // the call's place in the relayer's batch, and how many relayer extrinsics have carried it (an expired one is replaced)
      batch_index: tx.batchIndex,
      signings: tx.signings,
      submission: submission && {
        id: submission.id,
        relayer: submission.relayer,
        nonce: submission.nonce,
        tx_hash: submission.txHash,
        status: submission.status,
        signed_at_block: submission.signedAtBlock,
        block_number: submission.blockNumber,
        block_hash: submission.blockHash,
        extrinsic_index: submission.extrinsicIndex,
        calls: submission.items,
        created_at: iso(submission.createdAt),
        updated_at: iso(submission.updatedAt),
      },
    },
    result: tx.result,
    events: history.events.map((e) => ({ id: e.id, type: e.type, created_at: iso(e.created_at), payload: e.payload })),
    deliveries: history.events
      .filter((e) => e.delivery_id)
      .map((e) => ({
        id: e.delivery_id,
        event_id: e.id,
        event: e.type,
        // a credential in a webhook URL's query (or user part) is not for support tickets
        url: e.url === null ? null : redactedUrl(e.url),
        status: e.status,
        next_attempt_at: iso(e.next_attempt_at),
        delivered_at: iso(e.delivered_at),
        attempts: history.attempts
          .filter((a) => a.delivery_id === e.delivery_id)
          .map((a) => ({
            attempt: a.attempt,
            at: iso(a.created_at),
            status_code: a.status_code,
            duration_ms: a.duration_ms,
            error: a.error,
            outcome: a.outcome,
            next_attempt_at: iso(a.next_attempt_at),
          })),
      })),
    ledger: ledger.map((l) => ({
      id: l.id,
      kind: l.kind,
      amount: l.amount,
      balance_after: l.balanceAfter,
      reason: l.reason,
      created_at: iso(l.createdAt),
    })),
    trace_id: traceIdOf(tx.traceparent),
    // false: the trace was not sampled, so no collector has its spans (its log lines still carry the id)
    trace_sampled: sampledIn(tx.traceparent),
  };
}
