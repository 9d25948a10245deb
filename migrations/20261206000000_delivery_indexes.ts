import type { Knex } from 'knex';

/**
 * Fewer index entries written per webhook attempt (docs/performance.md, section 41). Every attempt updates its
 * delivery's status and updated_at, and inserts one attempt row:
 * - the deliveries' (status, updated_at) index took an entry for every delivered row, which no reader looks up (the
 *   reconciler reads idle pending deliveries, support the dead ones): two partial indexes, pending and dead, in its
 *   place; a delivered row, most of the table, is in neither;
 * - the attempts' created_at, read only by the pruning in ranges of time, in a BRIN index (attempts are appended in
 *   time order) rather than a B-tree entry per row;
 * - the attempts' transaction_id index goes: a transaction's attempts are read through its event's delivery
 *   (events.transaction_id and webhook_deliveries.event_id are unique, attempts are indexed by delivery).
 *
 * Built CONCURRENTLY, outside a transaction, so deliveries go on while it builds (as credit_ledger_organization_created_index);
 * a build that failed half way leaves an invalid index, dropped first on a rerun. The old indexes go only once the
 * new ones are built.
 */
export const config = { transaction: false };

const NEW = [
  ['webhook_deliveries_pending_idle_index', `ON webhook_deliveries (updated_at) WHERE status = 'pending'`],
  ['webhook_deliveries_dead_index', `ON webhook_deliveries (updated_at) WHERE status = 'dead'`],
  ['webhook_attempts_created_at_brin', 'ON webhook_attempts USING brin (created_at)'],
] as const;

const OLD = [
  ['webhook_deliveries_status_updated_at_index', 'ON webhook_deliveries (status, updated_at)'],
  ['webhook_attempts_created_at_index', 'ON webhook_attempts (created_at)'],
  ['webhook_attempts_transaction_id_index', 'ON webhook_attempts (transaction_id)'],
] as const;

async function build(knex: Knex, indexes: readonly (readonly [string, string])[]): Promise<void> {
  for (const [name, definition] of indexes) {
    await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
    await knex.raw(`CREATE INDEX CONCURRENTLY ${name} ${definition}`);
  }
}

async function drop(knex: Knex, indexes: readonly (readonly [string, string])[]): Promise<void> {
  for (const [name] of indexes) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
}

export async function up(knex: Knex): Promise<void> {
  await build(knex, NEW);
  await drop(knex, OLD);
}

export async function down(knex: Knex): Promise<void> {
  await build(knex, OLD);
  await drop(knex, NEW);
}
