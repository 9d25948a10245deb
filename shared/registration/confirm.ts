import { AppError } from '../errors';
import type { Principal } from '../api-keys/types';
import { appendLedgerEntry } from '../ledger/service';
import { PG, pgCode } from '../db/knex';
import { enqueueTransaction } from '../queue/jobs';
import type { AnchorPayload } from '../transactions/anchor';
import { atsIdFor, createTransaction, type NewTransaction } from '../transactions/service';
import { publishTransactionRows } from '../transactions/updates';
import type { TransactionRow } from '../transactions/row';
import type { PreparedQuote, UploadSession } from './types';
import type { Span } from '@opentelemetry/api';
import { ATTR, inSpan, traceparentOf } from '../telemetry/tracing';
import { jobStore, sessionOf, settleLapsedConfirm, type RegistrationDeps } from './service';

const preparedNotFound = () =>
  new AppError('registration.prepared_not_found', 'No prepared quote with this job_id (expired, or already confirmed)');

/** How long confirm holds a job while it debits; a hold whose process died lapses after it. */
const CONFIRM_HOLD_MS = 30_000;

export interface TransactionHandle {
  readonly transaction_id: string;
  readonly ws_url: string;
  readonly status_url: string;
}

/**
 * Confirm (docs/api.md#registration-confirm): takes the prepared job into `confirming` atomically, then debits the quoted price and
 * records the transaction (one per job id) in one SQL transaction, and enqueues it. A confirm whose debit is
 * refused leaves the job `prepared`, its quote as it was.
 */
export function confirmJob(
  app: RegistrationDeps,
  principal: Principal,
  jobId: string,
  kind: UploadSession['kind'],
  atsId?: number,
): Promise<TransactionHandle> {
  // the transaction's trace: every later step (its chain job, batch, finality, indexing, webhooks) joins it
  const attributes = { [ATTR.organization]: principal.organizationId, [ATTR.job]: jobId };
  return inSpan('works.confirm', { attributes }, (span) => confirmInSpan(app, principal, jobId, kind, atsId, span));
}

async function confirmInSpan(
  app: RegistrationDeps,
  principal: Principal,
  jobId: string,
  kind: UploadSession['kind'],
  atsId: number | undefined,
  span: Span,
): Promise<TransactionHandle> {
  const store = jobStore(app);
  const session = await sessionOf(store, principal, jobId, kind, atsId);
  if (!session) throw preparedNotFound();
  let taken = await store.beginConfirm(principal.organizationId, jobId, CONFIRM_HOLD_MS);
  if (taken.kind === 'lapsed') {
    await settleLapsedConfirm(app, store, session);
    taken = await store.beginConfirm(principal.organizationId, jobId, CONFIRM_HOLD_MS);
  }
  if (taken.kind !== 'taken') throw preparedNotFound();
  const quote = taken.quote;
  let created: TransactionRow;
  try {
    if (Date.parse(quote.expiresAt) <= Date.now()) throw preparedNotFound();
    if (!quote.isValid)
      throw new AppError('registration.quote_invalid', `This quote cannot be confirmed: ${quote.error?.message ?? 'invalid'}`);
    const recorded = { ...transactionOf(quote), apiKeyId: principal.apiKeyId, traceparent: traceparentOf() };
    const atsId = await atsIdFor(app.db, recorded);
    created = await app.db.transaction(async (trx) => {
      const row = await createTransaction(trx, recorded, atsId);
      await appendLedgerEntry(trx, {
        organizationId: principal.organizationId,
        kind: 'debit',
        amount: -quote.price.total_price_credits,
        reference: row.id,
        newReference: true,
        reason: kind,
      });
      return row;
    });
  } catch (err) {
    if (pgCode(err) === PG.uniqueViolation && (err as { constraint?: string }).constraint === 'transactions_job_id_unique') {
      // confirmed before, by a confirm whose hold lapsed after its commit
      await store.finishConfirm(principal.organizationId, jobId, session.audioKey);
      throw preparedNotFound();
    }
    await store.revertConfirm(principal.organizationId, jobId).catch(() => undefined);
    throw err;
  }
  const transactionId = created.id;
  span.setAttributes({ [ATTR.transaction]: transactionId, [ATTR.network]: quote.session.network });
  // a hold left in place lapses, and the next call finds the transaction (settleLapsedConfirm)
  await store.finishConfirm(principal.organizationId, jobId, session.audioKey).catch(() => undefined);
  await publishTransactionRows(app, [created]);
  const labels = { transactionId, organizationId: principal.organizationId, type: kind, network: quote.session.network };
  await enqueueTransaction(app.queues, labels).catch((err) => {
    // The transaction is durable in PostgreSQL; the reconciler (maintenance queue) enqueues it later.
    app.log.error({ err: { message: (err as Error).message }, transaction_id: transactionId }, 'could not enqueue confirmed transaction');
  });
  return { transaction_id: transactionId, ws_url: `/v1/ws/transactions/${transactionId}`, status_url: `/v1/transactions/${transactionId}` };
}

/** The transaction a confirmed quote becomes, with what it anchors: mapped from the quote once, here. */
function transactionOf(quote: PreparedQuote): Omit<NewTransaction, 'apiKeyId'> {
  const { session } = quote;
  const anchor: AnchorPayload = {
    jobId: session.jobId,
    commitment: quote.commitment,
    mediaHash: quote.mediaHash,
    merkleRoot: quote.merkleRoot,
    audioKey: session.audioKey,
    audioSize: quote.audioSize,
    title: session.title,
    filename: session.filename,
    creators: session.creators,
    reusedAudio: session.reusedAudio !== undefined,
  };
  return {
    jobId: session.jobId,
    kind: session.kind,
    organizationId: session.organizationId,
    network: session.network,
    anchor,
    priceCredits: quote.price.total_price_credits,
    externalUserRef: session.externalUserRef,
    workId: session.workId,
    atsId: session.atsId,
  };
}
