import type { Knex } from 'knex';

/**
 * One transaction per job id (docs/api.md#job-states: a job is confirmed once). Confirm's Redis state is the fast path;
 * this constraint is what holds when Redis was emptied or a confirm's process died between its debit and its
 * state move. Backfilled from the stored quote; where a job was confirmed twice before this (the re-prepare
 * bug), the first transaction keeps the job id.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('transactions', (t) => {
    t.uuid('job_id');
  });
  await knex.raw(`
    UPDATE transactions t SET job_id = first.job_id
    FROM (
      SELECT DISTINCT ON (quote->'session'->>'jobId') id, (quote->'session'->>'jobId')::uuid AS job_id
      FROM transactions
      WHERE quote->'session'->>'jobId' ~ '^[0-9a-f-]{36}$'
      ORDER BY quote->'session'->>'jobId', created_at, id
    ) first
    WHERE t.id = first.id`);
  await knex.schema.alterTable('transactions', (t) => {
    t.unique(['job_id'], { indexName: 'transactions_job_id_unique' });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('transactions', (t) => {
    t.dropUnique(['job_id'], 'transactions_job_id_unique');
    t.dropColumn('job_id');
  });
}
