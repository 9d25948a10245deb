import type { Knex } from 'knex';

/**
 * An organization's ledger by time: support's `org activity` sums the credits debited and refunded in a window
 * (since an hour ago, say), which the (organization_id, id) index cannot bound, so each was a walk through every
 * entry the organization ever had.
 *
 * Built CONCURRENTLY, outside a transaction, so confirms keep debiting while it builds (as
 * transactions_submission_id_index); a build that failed half way leaves an invalid index, dropped first on a rerun.
 */
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS credit_ledger_organization_created_index');
  await knex.raw('CREATE INDEX CONCURRENTLY credit_ledger_organization_created_index ON credit_ledger (organization_id, created_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS credit_ledger_organization_created_index');
}
