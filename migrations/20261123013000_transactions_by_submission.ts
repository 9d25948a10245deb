import type { Knex } from 'knex';

/**
 * A batch's items by their submission: recording a batch's block, retracting it, requeueing it and reading
 * its items all select transactions by `submission_id` alone, which the (network, status, submission_id)
 * index cannot serve, so each was a scan of every transaction ever made.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('transactions', (t) => {
    t.index(['submission_id'], 'transactions_submission_id_index');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('transactions', (t) => {
    t.dropIndex(['submission_id'], 'transactions_submission_id_index');
  });
}
