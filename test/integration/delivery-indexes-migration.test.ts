import { expect } from 'chai';
import type { Knex } from 'knex';
import { useOwnDatabase } from '../helpers/services';

const MIGRATION = '20261206000000_delivery_indexes.ts';
const BTREE_BACK = '20261206010000_attempts_created_at_btree.ts';

/** The webhook tables' indexes, by name, with their definitions. */
async function indexes(db: Knex): Promise<Map<string, string>> {
  const { rows } = await db.raw(
    `SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('webhook_deliveries', 'webhook_attempts') ORDER BY indexname`,
  );
  return new Map((rows as { indexname: string; indexdef: string }[]).map((r) => [r.indexname, r.indexdef]));
}

/** The index's oid and whether it is valid; undefined when there is none of that name. */
async function indexState(db: Knex, name: string): Promise<{ oid: number; valid: boolean } | undefined> {
  const { rows } = await db.raw('SELECT indexrelid::int AS oid, indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass(?)', [
    name,
  ]);
  return rows[0];
}

const ADDED = ['webhook_deliveries_pending_idle_index', 'webhook_deliveries_dead_index'];
const REMOVED = ['webhook_deliveries_status_updated_at_index', 'webhook_attempts_transaction_id_index'];

/**
 * Migration 20261206000000: the deliveries' (status, updated_at) index becomes two partial ones (pending, dead), the
 * attempts' transaction_id index goes and their created_at goes to a BRIN index, which 20261206010000 turns back into
 * a B-tree. On a database of its own: up, back down one and then the other, up; and a rerun after a failed build keeps
 * what was built whole and builds again what was left invalid (shared/db/indexes.ts).
 */
describe('the delivery-indexes migration, on a database of its own', () => {
  const ownDb = useOwnDatabase('delivery_indexes_migration');

  it('puts partial indexes in place of the status index, drops the attempts’ transaction index, keeps their created_at a B-tree, and back on the way down', async () => {
    const db = ownDb();
    await db.migrate.latest();
    const after = await indexes(db);
    expect(after.get('webhook_deliveries_pending_idle_index')).to.match(/\(updated_at\) WHERE \(status = 'pending'::text\)$/);
    expect(after.get('webhook_deliveries_dead_index')).to.match(/\(updated_at\) WHERE \(status = 'dead'::text\)$/);
    expect(after.get('webhook_attempts_created_at_index')).to.match(/btree \(created_at\)$/);
    for (const old of [...REMOVED, 'webhook_attempts_created_at_brin']) expect(after.has(old), old).to.equal(false);

    await db.migrate.down({ name: BTREE_BACK });
    const brin = await indexes(db);
    expect(brin.get('webhook_attempts_created_at_brin')).to.match(/USING brin \(created_at\)$/);
    expect(brin.has('webhook_attempts_created_at_index')).to.equal(false);

    await db.migrate.down({ name: MIGRATION });
    const before = await indexes(db);
    expect(before.get('webhook_deliveries_status_updated_at_index')).to.match(/btree \(status, updated_at\)$/);
    expect(before.get('webhook_attempts_created_at_index')).to.match(/btree \(created_at\)$/);
    expect(before.get('webhook_attempts_transaction_id_index')).to.match(/btree \(transaction_id\)$/);
    for (const added of [...ADDED, 'webhook_attempts_created_at_brin']) expect(before.has(added), added).to.equal(false);

    await db.migrate.latest();
    expect(await indexes(db)).to.deep.equal(after);
  });

  it('run again after a build that failed half way: a valid index is kept, an invalid one built again', async () => {
    const db = ownDb();
    await db.migrate.latest();
    await db.migrate.down({ name: BTREE_BACK });
    await db.migrate.down({ name: MIGRATION });
    // as a first run that built the pending index and failed while building the dead one leaves them
    await db.raw(`CREATE INDEX webhook_deliveries_pending_idle_index ON webhook_deliveries (updated_at) WHERE status = 'pending'`);
    await db.raw(`CREATE INDEX webhook_deliveries_dead_index ON webhook_deliveries (updated_at) WHERE status = 'dead'`);
    await db.raw(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass('webhook_deliveries_dead_index')`);
    const kept = await indexState(db, 'webhook_deliveries_pending_idle_index');
    const invalid = await indexState(db, 'webhook_deliveries_dead_index');
    expect(invalid).to.include({ valid: false });

    await db.migrate.latest();
    expect(await indexState(db, 'webhook_deliveries_pending_idle_index')).to.deep.equal(kept);
    const rebuilt = await indexState(db, 'webhook_deliveries_dead_index');
    expect(rebuilt).to.include({ valid: true });
    expect(rebuilt!.oid).to.not.equal(invalid!.oid);
    for (const old of REMOVED) expect(await indexState(db, old), old).to.equal(undefined);
  });
});
