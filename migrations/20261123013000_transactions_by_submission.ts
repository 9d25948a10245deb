import type { Knex } from 'knex';

/**
 * A batch's items by their submission: recording a batch's block, retracting it, requeueing it and reading
 * its items all select transactions by `submission_id` alone, which the (network, status, submission_id)
 * index cannot serve, so each was a scan of every transaction ever made.
 *
 * Built CONCURRENTLY, outside a transaction, so a large table keeps taking confirms and chain progress while
 * it builds (a plain CREATE INDEX blocks every write to the table until it is done). A build that failed half
 * way leaves an invalid index, dropped first on a rerun.
 */
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS transactions_submission_id_index');
  await knex.raw('CREATE INDEX CONCURRENTLY transactions_submission_id_index ON transactions (submission_id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS transactions_submission_id_index');
}
