import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Config } from '../config';
import { findWallet } from '../organizations/repo';
import type { NewEvent } from '../webhooks/service';
import type { FinalizedVersion } from '../works/indexing';
import { explorerUrl } from '../chain/explorer';
import { enterStep } from './steps';
import type { TransactionRow } from './repo';

// What a transaction's finalization writes, worked out from its row: the version it indexes, the row's changes and
// its event. outcomes.ts writes a group's together, one statement each.

type Inclusion = { readonly blockHash: string; readonly blockNumber: number; readonly index: number };

/** A transaction's finalization, worked out before any of its group's statements. */
export interface PlannedFinalization {
  readonly tx: TransactionRow;
  readonly version: FinalizedVersion;
  readonly changes: Record<string, unknown>;
  readonly event: NewEvent;
}

/** One transaction's finalization: its version for the index, its row's changes, its event. */
export async function planFinalization(
  trx: Knex.Transaction,
  chains: Config['chains'],
  tx: TransactionRow,
  finalizedAt: Date,
): Promise<PlannedFinalization> {
  const inclusion = includedBlock(tx);
  const registering = tx.type === 'register';
  const workId = registering ? tx.anchor.jobId : tx.workId!;
  const version = registering ? 1 : tx.version!;
  const accessCode = registering && !tx.externalUserRef ? `atc_${randomBytes(32).toString('hex')}` : undefined;
  const placement = { workId, version, inclusion, finalizedAt };
  const result = successResult(chains, tx, placement);
  const changes = {
    id: tx.id,
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
  };
  const event: NewEvent = {
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
  };
  return { tx, version: await finalizedVersion(trx, tx, { ...placement, accessCode }), changes, event };
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

async function finalizedVersion(
  trx: Knex.Transaction,
  tx: TransactionRow,
  at: Placement & { accessCode?: string },
): Promise<FinalizedVersion> {
  const wallet = await findWallet(trx, tx.organizationId, tx.network);
  return {
    ...tx.anchor,
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
  };
}

/** The transaction's `result` on success (docs/api.md#transactions). */
function successResult(chains: Config['chains'], tx: TransactionRow, at: Placement) {
  return {
    ats_id: tx.atsId,
    version: at.version,
    work_id: at.workId,
    tx_hash: tx.txHash,
    block_number: at.inclusion.blockNumber,
    block_hash: at.inclusion.blockHash,
    explorer_url: explorerUrl(chains, tx.network, at.inclusion),
    finalized_at: at.finalizedAt.toISOString(),
  };
}

/** What an outcome's event carries of its transaction, besides its type and payload. */
export const eventOf = (tx: TransactionRow) => ({
  transactionId: tx.id,
  organizationId: tx.organizationId,
  apiKeyId: tx.apiKeyId,
  traceparent: tx.traceparent,
  confirmedAt: tx.createdAt,
});
