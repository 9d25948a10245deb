import type { Knex } from 'knex';

/**
 * What the operators' metrics read at each scrape (shared/metrics/state.ts), without scanning every row ever
 * written:
 * - `chain_submissions.fee_planck`: what the relayer paid for a batch (the chain's `TransactionFeePaid` of the
 *   block it landed in), and an index of the batches in blocks by height, for the relayer's recent rate of fees;
 * - an index of the transactions not yet terminal, the only ones counted (and the oldest of them aged).
 *
 * The indexes are built CONCURRENTLY, outside a transaction, so a large table keeps taking writes meanwhile; a
 * build that failed half way leaves an invalid index, dropped first on a rerun.
 */
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE chain_submissions ADD COLUMN IF NOT EXISTS fee_planck numeric(39, 0)');
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS chain_submissions_in_blocks');
  await knex.raw(
    `CREATE INDEX CONCURRENTLY chain_submissions_in_blocks ON chain_submissions (network, block_number)
       WHERE status IN ('in_block', 'finalized')`,
  );
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS transactions_open');
  await knex.raw(
    `CREATE INDEX CONCURRENTLY transactions_open ON transactions (network, status, created_at)
       WHERE status IN ('pending', 'submitted', 'in_block')`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS transactions_open');
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS chain_submissions_in_blocks');
  await knex.raw('ALTER TABLE chain_submissions DROP COLUMN IF EXISTS fee_planck');
}
