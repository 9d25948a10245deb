import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { AppContext } from '../context';
import { findWallet } from '../organizations/repo';
import { appendLedgerEntry } from '../ledger/service';
import { recordEvent } from '../webhooks/service';
import { enqueueDelivery } from '../webhooks/enqueue';
import { findTransaction, updateTransaction, type TransactionRow } from './repo';
import { enterStep } from './steps';
import { publishTransactionUpdate } from './updates';
import { enqueueCertificate } from '../certificates/service';

// The two ends of a confirmed transaction: finalized and indexed, or failed and refunded.

function explorerUrl(app: AppContext, tx: TransactionRow, inclusion: { blockNumber: number; index: number }): string {
  const template = app.config.chains.find((c) => c.network === tx.network)?.explorerUrlTemplate ?? '';
  return template.replace('{block}', String(inclusion.blockNumber)).replace('{index}', String(inclusion.index));
}

/**
 * Writes the work and its version, marks the transaction finalized and records the event: one SQL
 * transaction. The block is the one recorded when the batch was included, now final and canonical.
 */
export async function finalize(app: AppContext, transactionId: string): Promise<TransactionRow> {
  const finalizedAt = new Date();
  const deliveryId = await app.db.transaction(async (trx) => {
    const tx = await findTransaction(trx, transactionId, { forUpdate: true });
    if (!tx || tx.status === 'finalized' || tx.status === 'failed') return null;
    if (tx.blockHash === null || tx.blockNumber === null || tx.extrinsicIndex === null) throw new Error(`transaction ${tx.id} has no block to finalize`);
    const inclusion = { blockHash: tx.blockHash, blockNumber: tx.blockNumber, index: tx.extrinsicIndex };
    const q = tx.quote;
    const wallet = await findWallet(trx, tx.organizationId, tx.network);
    const registering = tx.type === 'register';
    const workId = registering ? q.session.jobId : tx.workId!;
    const version = registering ? 1 : tx.version!;
    const accessCode = registering && !tx.externalUserRef ? `atc_${randomBytes(32).toString('hex')}` : undefined;
    if (registering) {
      await trx('works').insert({
        id: workId,
        organization_id: tx.organizationId,
        network: tx.network,
        ats_id: tx.atsId,
        owner: wallet!.address,
        title: q.session.title,
        asset_filename: q.session.filename,
        latest_version: 1,
        latest_commitment: q.commitment,
        external_user_ref: tx.externalUserRef,
        access_code_hash: accessCode ? createHash('sha256').update(accessCode).digest() : null,
        has_files: true,
        created_at: finalizedAt,
        latest_version_at: finalizedAt,
      });
    } else {
      // versions of a work are numbered one after another (see allocateVersion); the row lock orders writers
      const work = await trx('works').where({ id: workId }).forUpdate().first('latest_version');
      if (Number(work.latest_version) + 1 !== version) throw new Error(`work ${workId} is at version ${work.latest_version}; cannot add version ${version}`);
      await trx('works')
        .where({ id: workId })
        .update({
          latest_version: version,
          latest_commitment: q.commitment,
          latest_version_at: finalizedAt,
          ...(q.session.reusedAudio ? {} : { asset_filename: q.session.filename }),
        });
    }
    await trx('work_versions').insert({
      work_id: workId,
      version,
      transaction_id: tx.id,
      commitment: q.commitment,
      media_hash: q.mediaHash,
      merkle_root: q.merkleRoot,
      title: q.session.title,
      filename: q.session.filename,
      creators: JSON.stringify(q.session.creators),
      audio_key: q.session.audioKey,
      audio_size: q.audioSize,
      tx_hash: tx.txHash,
      block_number: inclusion.blockNumber,
      block_hash: inclusion.blockHash,
      extrinsic_index: inclusion.index,
      finalized_at: finalizedAt,
    });
    const explorer = explorerUrl(app, tx, inclusion);
    const result = {
      ats_id: tx.atsId,
      version,
      work_id: workId,
      tx_hash: tx.txHash,
      block_number: inclusion.blockNumber,
      block_hash: inclusion.blockHash,
      explorer_url: explorer,
      finalized_at: finalizedAt.toISOString(),
    };
    await updateTransaction(trx, tx.id, {
      status: 'finalized',
      current_step: 'completed',
      steps: enterStep(tx.steps, 'completed', finalizedAt),
      block_hash: inclusion.blockHash,
      block_number: inclusion.blockNumber,
      extrinsic_index: inclusion.index,
      work_id: workId,
      version,
      result,
      finalized_at: finalizedAt,
    });
    return recordEvent(trx, app.box, {
      transactionId: tx.id,
      organizationId: tx.organizationId,
      apiKeyId: tx.apiKeyId,
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
        block_number: inclusion.blockNumber,
        block_hash: inclusion.blockHash,
        access_code: null,
        explorer_url: explorer,
        finalized_at: finalizedAt.toISOString(),
        // contract §7: work_updated is work_registered's fields plus the version
        ...(registering ? {} : { version }),
      },
      accessCode,
    });
  });
  await deliverAfterCommit(app, deliveryId);
  await publishTransactionUpdate(app, transactionId);
  await enqueueCertificate(app, transactionId);
  return (await findTransaction(app.db, transactionId))!;
}

/** Marks the transaction failed, refunds the whole debit and records work_failed: one SQL transaction. */
export async function fail(app: AppContext, transactionId: string, reason: string, message: string): Promise<TransactionRow> {
  const deliveryId = await app.db.transaction((trx) => failWithin(trx, app, transactionId, reason, message));
  await deliverAfterCommit(app, deliveryId);
  await publishTransactionUpdate(app, transactionId);
  return (await findTransaction(app.db, transactionId))!;
}

/**
 * fail's work inside the caller's SQL transaction; returns the delivery to enqueue once it commits
 * (null when the transaction was already terminal).
 */
export async function failWithin(trx: Knex.Transaction, app: AppContext, transactionId: string, reason: string, message: string): Promise<string | null> {
  const failedAt = new Date();
  const current = await findTransaction(trx, transactionId, { forUpdate: true });
  if (!current || current.status === 'finalized' || current.status === 'failed') return null;
  const tx = current;
  await appendLedgerEntry(trx, { organizationId: tx.organizationId, kind: 'refund', amount: tx.priceCredits, reference: tx.id, reason });
  await updateTransaction(trx, tx.id, {
    status: 'failed',
    current_step: 'failed',
    steps: enterStep(tx.steps, 'failed', failedAt),
    result: { error: { code: reason, message } },
  });
  return recordEvent(trx, app.box, {
    transactionId: tx.id,
    organizationId: tx.organizationId,
    apiKeyId: tx.apiKeyId,
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
}

/** Hands a recorded event's delivery to the webhooks queue, once its SQL transaction has committed. */
export async function deliverAfterCommit(app: AppContext, deliveryId: string | null): Promise<void> {
  if (deliveryId) await enqueueDelivery(app.queues, app.config.webhooks, deliveryId);
}

