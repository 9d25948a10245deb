import { expect } from 'chai';
import type { Knex } from 'knex';
import { useOwnDatabase } from '../helpers/services';

const MIGRATION = '20261206000000_delivery_indexes.ts';

/** The webhook tables' indexes, by name, with their definitions. */
async function indexes(db: Knex): Promise<Map<string, string>> {
  const { rows } = await db.raw(
    `SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('webhook_deliveries', 'webhook_attempts') ORDER BY indexname`,
  );
  return new Map((rows as { indexname: string; indexdef: string }[]).map((r) => [r.indexname, r.indexdef]));
}

/**
 * Migration 20261206000000: the deliveries' (status, updated_at) index becomes two partial ones (pending, dead), the
 * attempts' created_at a BRIN index, and their transaction_id index goes. On a database of its own, up, back down, up.
 */
describe('the delivery-indexes migration, on a database of its own', () => {
  const ownDb = useOwnDatabase('delivery_indexes_migration');

  it('puts partial and BRIN indexes in place of the old ones, and the old ones back on the way down', async () => {
    const db = ownDb();
    await db.migrate.latest();
    const after = await indexes(db);
    expect(after.get('webhook_deliveries_pending_idle_index')).to.match(/\(updated_at\) WHERE \(status = 'pending'::text\)$/);
    expect(after.get('webhook_deliveries_dead_index')).to.match(/\(updated_at\) WHERE \(status = 'dead'::text\)$/);
    expect(after.get('webhook_attempts_created_at_brin')).to.match(/USING brin \(created_at\)$/);
    for (const old of [
      'webhook_deliveries_status_updated_at_index',
      'webhook_attempts_created_at_index',
      'webhook_attempts_transaction_id_index',
    ])
      expect(after.has(old), old).to.equal(false);

    await db.migrate.down({ name: MIGRATION });
    const before = await indexes(db);
    expect(before.get('webhook_deliveries_status_updated_at_index')).to.match(/btree \(status, updated_at\)$/);
    expect(before.get('webhook_attempts_created_at_index')).to.match(/btree \(created_at\)$/);
    expect(before.get('webhook_attempts_transaction_id_index')).to.match(/btree \(transaction_id\)$/);
    for (const added of ['webhook_deliveries_pending_idle_index', 'webhook_deliveries_dead_index', 'webhook_attempts_created_at_brin'])
      expect(before.has(added), added).to.equal(false);

    await db.migrate.latest();
    expect(await indexes(db)).to.deep.equal(after);
  });
});
