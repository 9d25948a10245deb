import type { Knex } from 'knex';
import type { Network } from '../config';

/** The relayer's batches (`chain_submissions`): the one module that names the table. */
export interface SubmissionRow {
  readonly id: string;
  readonly network: Network;
  readonly relayer: string;
  readonly nonce: number;
  readonly extrinsicHex: string;
  readonly txHash: string;
  readonly signedAtBlock: number;
  /** How many calls the batch carries. */
  readonly items: number;
  readonly status: 'signed' | 'in_block' | 'finalized' | 'expired' | 'rejected';
}

type Db = Knex | Knex.Transaction;

const toSubmission = (r: Record<string, any>): SubmissionRow => ({
  id: r.id,
  network: r.network,
  relayer: r.relayer,
  nonce: Number(r.nonce),
  extrinsicHex: r.extrinsic_hex,
  txHash: r.tx_hash,
  signedAtBlock: r.signed_at_block,
  items: Number(r.items),
  status: r.status,
});

/** A batch with where it landed, as support staff read it (the CLI's `transaction show`). */
export interface SubmissionRecord extends Omit<SubmissionRow, 'extrinsicHex'> {
  readonly blockHash: string | null;
  readonly blockNumber: number | null;
  readonly extrinsicIndex: number | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export async function findSubmission(db: Db, id: string): Promise<SubmissionRecord | undefined> {
  const r = await db('chain_submissions').where({ id }).first();
  if (!r) return undefined;
  const { extrinsicHex: _, ...row } = toSubmission(r);
  return {
    ...row,
    blockHash: r.block_hash,
    blockNumber: r.block_number,
    extrinsicIndex: r.extrinsic_index,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** The network's batches signed and not yet seen in a block, by nonce. */
export async function signedSubmissions(db: Db, network: Network): Promise<SubmissionRow[]> {
  return (await db('chain_submissions').where({ network, status: 'signed' }).orderBy('nonce')).map(toSubmission);
}

/**
 * The nonces the relayer's batches not yet final hold: those on their way, and those seen in a block that a reorg may
 * still take back (the node puts such a batch back in its pool, while the best block's state no longer counts it).
 */
export async function unfinalNonces(db: Db, network: Network, relayer: string): Promise<bigint[]> {
  const nonces = await db('chain_submissions').where({ network, relayer }).whereIn('status', ['signed', 'in_block']).pluck('nonce');
  return nonces.map((n: string) => BigInt(n));
}

/** A subquery of the ids of every batch on its way, for a query of the rows they carry. */
export function signedSubmissionIds(db: Db): Knex.QueryBuilder {
  return db('chain_submissions').where({ status: 'signed' }).select('id');
}

export interface NewSubmission {
  readonly network: Network;
  readonly relayer: string;
  readonly nonce: number;
  readonly genesisHash: string;
  readonly extrinsicHex: string;
  readonly txHash: string;
  readonly signedAtBlock: number;
  readonly items: number;
}

export async function insertSubmission(db: Db, s: NewSubmission): Promise<SubmissionRow> {
  const [row] = await db('chain_submissions')
    .insert({
      network: s.network,
      relayer: s.relayer,
      nonce: s.nonce,
      genesis_hash: s.genesisHash,
      extrinsic_hex: s.extrinsicHex,
      tx_hash: s.txHash,
      signed_at_block: s.signedAtBlock,
      items: s.items,
    })
    .returning('*');
  return toSubmission(row);
}

/**
 * The batch seen in a block, with what it cost; answers whether this is the first fee recorded for it (a batch
 * whose block was retracted comes back here from the next one, and its fee is counted once).
 */
export async function markSubmissionInBlock(
  db: Db,
  id: string,
  at: { blockHash: string; blockNumber: number; index: number; fee?: { planck: bigint } },
): Promise<{ firstFee: boolean }> {
  const before = await db('chain_submissions').where({ id }).forUpdate().first('fee_planck');
  await db('chain_submissions')
    .where({ id })
    .update({
      status: 'in_block',
      block_hash: at.blockHash,
      block_number: at.blockNumber,
      extrinsic_index: at.index,
      fee_planck: at.fee?.planck.toString() ?? null,
      updated_at: db.fn.now(),
    });
  return { firstFee: at.fee !== undefined && before?.fee_planck == null };
}

/** What the network's relayer paid for its batches in blocks above `fromBlock` (planck; 0 when none). */
export async function relayerFeesSince(db: Db, network: Network, fromBlock: number): Promise<bigint> {
  const row = await db('chain_submissions')
    .where({ network })
    .whereIn('status', ['in_block', 'finalized'])
    .where('block_number', '>', fromBlock)
    .first(db.raw('coalesce(sum(fee_planck), 0)::text AS fees'));
  return BigInt(row.fees);
}

/** A batch that can never be included. */
export async function markSubmissionGivenUp(db: Db, id: string, status: 'expired' | 'rejected'): Promise<void> {
  await db('chain_submissions').where({ id }).update({ status, updated_at: db.fn.now() });
}

/** A batch whose block was retracted is on its way again. */
export async function markSubmissionRetracted(db: Db, id: string): Promise<void> {
  await db('chain_submissions')
    .where({ id, status: 'in_block' })
    .update({ status: 'signed', block_hash: null, block_number: null, extrinsic_index: null, updated_at: db.fn.now() });
}

/**
 * Submissions this process marked finalized, or is marking, the last `FINALIZED_KEPT`: every item of a batch
 * reaches finality on its own, at the same moment as the others, and each but the first found nothing to change
 * (a statement per registration). Its items share the first one's statement. A final block is never retracted,
 * so none of them moves again; one that was not marked (not in a block) is asked about again.
 */
const finalizing = new Map<string, Promise<boolean>>();
const FINALIZED_KEPT = 1_000;

export async function markSubmissionFinalized(db: Db, id: string): Promise<void> {
  let marked = finalizing.get(id);
  if (!marked) {
    marked = db('chain_submissions')
      .where({ id, status: 'in_block' })
      .update({ status: 'finalized', updated_at: db.fn.now() })
      .then((count) => count > 0);
    marked.then(
      (done) => done || finalizing.delete(id),
      () => finalizing.delete(id),
    );
    if (finalizing.size >= FINALIZED_KEPT) finalizing.delete(finalizing.keys().next().value!);
    finalizing.set(id, marked);
  }
  await marked;
}

/** The block of the relayer's last batch seen finalized on the network. */
export async function lastFinalizedBlock(
  db: Db,
  network: Network,
  relayer: string,
): Promise<{ blockNumber: number; blockHash: string } | undefined> {
  const row = await db('chain_submissions')
    .where({ network, relayer, status: 'finalized' })
    .orderBy('block_number', 'desc')
    .first('block_number', 'block_hash');
  return row ? { blockNumber: Number(row.block_number), blockHash: row.block_hash } : undefined;
}

/** Every batch of a chain that is gone: the ones on their way with it, then its finalized history. */
export async function expireNetworkSubmissions(db: Db, network: Network): Promise<void> {
  await db('chain_submissions')
    .where({ network })
    .whereIn('status', ['signed', 'in_block'])
    .update({ status: 'expired', updated_at: db.fn.now() });
  await db('chain_submissions').where({ network, status: 'finalized' }).update({ status: 'expired', updated_at: db.fn.now() });
}
