import type { Knex } from 'knex';
import { replaceIndexesConcurrently, type IndexDefinition } from '../shared/db/indexes';

/**
 * Fewer index entries written per webhook attempt (docs/performance.md, section 41). Every attempt updates its
 * delivery's status and updated_at, and inserts one attempt row:
 * - the deliveries' (status, updated_at) index took an entry for every delivered row, which no reader looks up (the
 *   reconciler reads idle pending deliveries, support the dead ones): two partial indexes, pending and dead, in its
 *   place; a delivered row, most of the table, is in neither;
 * - the attempts' transaction_id index goes: a transaction's attempts are read through its event's delivery
 *   (events.transaction_id and webhook_deliveries.event_id are unique, attempts are indexed by delivery);
 * - the attempts' created_at went to a BRIN index here, which the pruning read worse than the B-tree:
 *   20261206010000_attempts_created_at_btree puts the B-tree back.
 *
 * Built CONCURRENTLY, outside a transaction, so deliveries go on while it builds (as credit_ledger_organization_created_index);
 * a rerun after a failure keeps what was built whole (shared/db/indexes.ts). The old indexes go only once the new ones
 * are built.
 */
export const config = { transaction: false };

const NEW: readonly IndexDefinition[] = [
  ['webhook_deliveries_pending_idle_index', `ON webhook_deliveries (updated_at) WHERE status = 'pending'`],
  ['webhook_deliveries_dead_index', `ON webhook_deliveries (updated_at) WHERE status = 'dead'`],
  ['webhook_attempts_created_at_brin', 'ON webhook_attempts USING brin (created_at)'],
];

const OLD: readonly IndexDefinition[] = [
  ['webhook_deliveries_status_updated_at_index', 'ON webhook_deliveries (status, updated_at)'],
  ['webhook_attempts_created_at_index', 'ON webhook_attempts (created_at)'],
  ['webhook_attempts_transaction_id_index', 'ON webhook_attempts (transaction_id)'],
];

export async function up(knex: Knex): Promise<void> {
  await replaceIndexesConcurrently(knex, { build: NEW, drop: OLD });
}

export async function down(knex: Knex): Promise<void> {
  await replaceIndexesConcurrently(knex, { build: OLD, drop: NEW });
}
