import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { AppContext } from '../context';
import { AnchorService, ERA_PERIOD, SubmissionRejected, type Inclusion } from '../chain/anchors';
import { findWallet } from '../organizations/repo';
import { walletSeedAad } from '../organizations/service';
import { appendLedgerEntry } from '../ledger/service';
import { PROTOCOL_VERSION } from '../registration/commitment';
import { recordEvent } from '../webhooks/service';
import { findTransaction, updateTransaction, type TransactionRow } from './repo';
import { enterStep, type StepName } from './steps';

export interface PipelineDeps {
  readonly app: AppContext;
  readonly anchors: AnchorService;
}

/**
 * Whether the signed bytes are past their mortal era, judged from the chain's height rather than the pool's
 * message (an expired extrinsic is often reported as a bad signature).
 */
async function expired(anchors: AnchorService, tx: TransactionRow): Promise<boolean> {
  if (tx.submittedAtBlock === null) return false;
  return (await anchors.bestBlockNumber(tx.network)) >= tx.submittedAtBlock + ERA_PERIOD;
}

/** Thrown when the transaction should be tried again later (a reorg, a node away): the job retries. */
export class RetryLater extends Error {
  override readonly name = 'RetryLater';
}

/**
 * Moves one confirmed transaction to a terminal state. Safe to run again at any point after a crash: the
 * extrinsic is signed once and its bytes kept before sending, so a rerun resends the same bytes (which the
 * relayer nonce lets into at most one block) or finds them on chain; indexing and refunds are guarded by
 * the transaction's status under a row lock and by the ledger's one-entry-per-reference rule.
 */
export async function advanceTransaction(deps: PipelineDeps, transactionId: string): Promise<TransactionRow> {
  const { app, anchors } = deps;
  let tx = await findTransaction(app.db, transactionId);
  if (!tx) throw new Error(`transaction ${transactionId} does not exist`);
  if (tx.status === 'finalized' || tx.status === 'failed') return tx;

  if (!tx.extrinsicHex) {
    tx = await step(app, tx, 'preparing_transaction');
    tx = await step(app, tx, 'signing');
    tx = await signOnce(deps, tx);
  }

  tx = await step(app, tx, 'submitting', { status: tx.status === 'pending' ? 'submitted' : tx.status });
  let inclusion: Inclusion | undefined;
  try {
    inclusion = await anchors.submit(tx.network, tx.extrinsicHex!);
  } catch (err) {
    // Sent before a crash, or rejected now because it is already in: look for it before giving up.
    inclusion = await anchors.find(tx.network, tx.txHash!, tx.submittedAtBlock ?? 0);
    if (!inclusion) {
      if (err instanceof SubmissionRejected && tx.signings < 2 && (await expired(anchors, tx))) {
        // Its mortal era ended before any block took it, so those bytes can never be included: sign afresh, once.
        await releaseNonce(app.db, tx, anchors.relayerAddress(tx.network));
        await updateTransaction(app.db, tx.id, { extrinsic_hex: null, tx_hash: null, relayer_nonce: null, submitted_at_block: null });
        app.log.warn({ transaction_id: tx.id }, 'extrinsic expired unincluded; signing it again');
        return advanceTransaction(deps, transactionId);
      }
      if (err instanceof SubmissionRejected) {
        await releaseNonce(app.db, tx, anchors.relayerAddress(tx.network));
        return fail(deps, tx, 'chain.submission_rejected', `The chain refused the transaction: ${err.message}`);
      }
      throw err;
    }
  }

  tx = await step(app, tx, 'confirming', {
    status: 'in_block',
    block_hash: inclusion.blockHash,
    block_number: inclusion.blockNumber,
    extrinsic_index: inclusion.index,
  });
  if (!inclusion.success) return fail(deps, tx, 'chain.extrinsic_failed', `The transaction failed on chain: ${inclusion.error ?? 'unknown error'}`);

  const canonical = await anchors.waitFinalized(tx.network, inclusion.blockNumber, inclusion.blockHash);
  if (!canonical) {
    await updateTransaction(app.db, tx.id, { status: 'submitted', block_hash: null, block_number: null, extrinsic_index: null });
    throw new RetryLater('the block was retracted before finality');
  }
  return finalize(deps, tx.id, inclusion);
}

/** Records entering a step (and any column changes); returns the row as it now stands. */
async function step(app: AppContext, tx: TransactionRow, name: StepName, extra: { status?: TransactionRow['status'] } & Record<string, unknown> = {}): Promise<TransactionRow> {
  const steps = enterStep(tx.steps, name);
  await updateTransaction(app.db, tx.id, { current_step: name, steps, ...extra });
  return { ...tx, steps, currentStep: name, status: extra.status ?? tx.status };
}

/** Allocates the relayer nonce and signs, then stores the bytes, all before anything is sent. */
async function signOnce({ app, anchors }: PipelineDeps, tx: TransactionRow): Promise<TransactionRow> {
  const wallet = await findWallet(app.db, tx.organizationId, tx.network);
  if (!wallet) throw new Error(`organization ${tx.organizationId} has no ${tx.network} wallet`);
  const relayer = anchors.relayerAddress(tx.network);
  const chainNonce = await anchors.nextRelayerNonce(tx.network);
  await app.db.transaction(async (trx) => {
    const current = await findTransaction(trx, tx.id, { forUpdate: true });
    if (current?.extrinsicHex) return; // another run signed it first
    await trx.raw(`INSERT INTO relayer_nonces (network, address, next_nonce) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, [tx.network, relayer, chainNonce]);
    const row = await trx('relayer_nonces').where({ network: tx.network, address: relayer }).forUpdate().first('next_nonce');
    const nonce = Math.max(Number(row.next_nonce), chainNonce);
    const seed = app.box.open(wallet.seedEncrypted, walletSeedAad(tx.organizationId, tx.network));
    let signed;
    try {
      signed = await anchors.sign(
        tx.network,
        {
          action: tx.type === 'register' ? 'register' : 'update',
          network: tx.network,
          protocolVersion: PROTOCOL_VERSION,
          atsId: BigInt(tx.atsId ?? 0),
          version: tx.version ?? 1,
          commitment: Buffer.from(tx.quote.commitment.slice(2), 'hex'),
          ownerSeed: seed,
        },
        nonce,
      );
    } finally {
      seed.fill(0);
    }
    await trx('relayer_nonces').where({ network: tx.network, address: relayer }).update({ next_nonce: nonce + 1 });
    await updateTransaction(trx, tx.id, {
      extrinsic_hex: signed.hex,
      tx_hash: signed.hash,
      relayer_nonce: nonce,
      submitted_at_block: signed.signedAtBlock,
      signings: (current?.signings ?? 0) + 1,
    });
  });
  const signed = await findTransaction(app.db, tx.id);
  return signed!;
}

/** A refused extrinsic leaves its nonce unused: hand it back so later transactions are not stuck behind it. */
async function releaseNonce(db: Knex, tx: TransactionRow, relayer: string): Promise<void> {
  if (tx.relayerNonce === null) return;
  await db('relayer_nonces').where({ network: tx.network, address: relayer }).where('next_nonce', '>', tx.relayerNonce).update({ next_nonce: tx.relayerNonce });
}

function explorerUrl(app: AppContext, tx: TransactionRow, inclusion: { blockNumber: number; index: number }): string {
  const template = app.config.chains.find((c) => c.network === tx.network)?.explorerUrlTemplate ?? '';
  return template.replace('{block}', String(inclusion.blockNumber)).replace('{index}', String(inclusion.index));
}

/** Writes the work and its version, marks the transaction finalized and records the event: one SQL transaction. */
async function finalize({ app }: PipelineDeps, transactionId: string, inclusion: Inclusion): Promise<TransactionRow> {
  const finalizedAt = new Date();
  const deliveryId = await app.db.transaction(async (trx) => {
    const tx = await findTransaction(trx, transactionId, { forUpdate: true });
    if (!tx || tx.status === 'finalized' || tx.status === 'failed') return null;
    const q = tx.quote;
    const wallet = await findWallet(trx, tx.organizationId, tx.network);
    const workId = tx.type === 'register' ? q.session.jobId : tx.workId!;
    const accessCode = tx.type === 'register' && !tx.externalUserRef ? `atc_${randomBytes(32).toString('hex')}` : undefined;
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
    await trx('work_versions').insert({
      work_id: workId,
      version: 1,
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
      version: 1,
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
      version: 1,
      result,
      finalized_at: finalizedAt,
    });
    return recordEvent(trx, app.box, {
      transactionId: tx.id,
      organizationId: tx.organizationId,
      apiKeyId: tx.apiKeyId,
      type: 'work_registered',
      payload: {
        event: 'work_registered',
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
      },
      accessCode,
    });
  });
  await enqueueDelivery(app, deliveryId);
  return (await findTransaction(app.db, transactionId))!;
}

/** Marks the transaction failed, refunds the whole debit and records work_failed: one SQL transaction. */
export async function fail({ app }: PipelineDeps, tx: TransactionRow, reason: string, message: string): Promise<TransactionRow> {
  const failedAt = new Date();
  const deliveryId = await app.db.transaction(async (trx) => {
    const current = await findTransaction(trx, tx.id, { forUpdate: true });
    if (!current || current.status === 'finalized' || current.status === 'failed') return null;
    await appendLedgerEntry(trx, { organizationId: tx.organizationId, kind: 'refund', amount: current.priceCredits, reference: tx.id, reason });
    await updateTransaction(trx, tx.id, {
      status: 'failed',
      current_step: 'failed',
      steps: enterStep(current.steps, 'failed', failedAt),
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
  });
  await enqueueDelivery(app, deliveryId);
  return (await findTransaction(app.db, tx.id))!;
}

export async function enqueueDelivery(app: AppContext, deliveryId: string | null): Promise<void> {
  if (!deliveryId) return;
  const schedule = app.config.webhooks.retrySchedule;
  await app.queues.webhooks.add('deliver', { deliveryId }, { jobId: deliveryId, attempts: schedule.length + 1, backoff: { type: 'schedule' } });
}

