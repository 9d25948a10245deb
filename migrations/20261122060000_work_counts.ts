import type { Knex } from 'knex';

/**
 * The listing's `total_count` without a scan (issue 10): how many works each organization has on each network,
 * kept by the database itself in the same transaction as the rows it counts, so a listing sees the count and the
 * page from one snapshot (one statement since section 30 of docs/performance.md), as when it counted rows. An unfiltered or network-filtered count
 * sums a few rows here instead of walking up to every index entry of the organization.
 *
 * - Each organization and network has up to SLOTS counter rows, and a transaction adds to the slot of its
 *   connection (backend pid modulo SLOTS): a counter row stays locked from a work's insert to its transaction's
 *   commit, and with one row per organization and network, concurrent finalizations of one organization would
 *   wait for each other's whole tail (half the throughput, measured with 10 connections). A slot may go
 *   negative (a delete on another connection than the insert); the sum is the count.
 * - INSERT: one statement-level trigger over the inserted rows (a transition table), so a bulk
 *   `INSERT … SELECT` of a million rows adds one grouped upsert, not a million, in key order.
 * - DELETE: likewise, subtracting. TRUNCATE empties the counts.
 * - UPDATE: only a change of organization_id or network moves a work between counters; a row trigger whose
 *   WHEN is false for every other update (a new version) costs nothing.
 * - The counts change only through these triggers (as organizations.credit_balance only through the ledger).
 */
const SLOTS = 16;

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('work_counts', (t) => {
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.text('network').notNullable();
    t.smallint('slot').notNullable();
    t.bigInteger('works').notNullable();
    t.primary(['organization_id', 'network', 'slot']);
  });

  // Held to the end of the migration's transaction: no work is written between the triggers and the backfill.
  await knex.raw('LOCK TABLE works IN SHARE ROW EXCLUSIVE MODE');
  await knex.raw(`
    CREATE FUNCTION work_counts_change() RETURNS trigger AS $$
    BEGIN
      -- both statement triggers name their transition table "changed"; a DELETE subtracts
      INSERT INTO work_counts (organization_id, network, slot, works)
        SELECT organization_id, network, pg_backend_pid() % ${SLOTS}, CASE TG_OP WHEN 'DELETE' THEN -count(*) ELSE count(*) END
        FROM changed GROUP BY organization_id, network ORDER BY organization_id, network
        ON CONFLICT (organization_id, network, slot) DO UPDATE SET works = work_counts.works + excluded.works;
      RETURN NULL;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER work_counts_add AFTER INSERT ON works
      REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION work_counts_change();
    CREATE TRIGGER work_counts_remove AFTER DELETE ON works
      REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION work_counts_change();

    CREATE FUNCTION work_counts_move() RETURNS trigger AS $$
    BEGIN
      INSERT INTO work_counts (organization_id, network, slot, works)
        VALUES (OLD.organization_id, OLD.network, pg_backend_pid() % ${SLOTS}, -1), (NEW.organization_id, NEW.network, pg_backend_pid() % ${SLOTS}, 1)
        ON CONFLICT (organization_id, network, slot) DO UPDATE SET works = work_counts.works + excluded.works;
      RETURN NULL;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER work_counts_move AFTER UPDATE OF organization_id, network ON works
      FOR EACH ROW WHEN (OLD.organization_id IS DISTINCT FROM NEW.organization_id OR OLD.network IS DISTINCT FROM NEW.network)
      EXECUTE FUNCTION work_counts_move();

    CREATE FUNCTION work_counts_clear() RETURNS trigger AS $$
    BEGIN
      DELETE FROM work_counts;
      RETURN NULL;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER work_counts_clear AFTER TRUNCATE ON works
      FOR EACH STATEMENT EXECUTE FUNCTION work_counts_clear();
  `);

  await knex.raw(`
    INSERT INTO work_counts (organization_id, network, slot, works)
      SELECT organization_id, network, 0, count(*) FROM works GROUP BY organization_id, network`);

  await knex.raw(`
    CREATE FUNCTION work_counts_guard() RETURNS trigger AS $$
    BEGIN
      IF pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'work_counts changes only through the triggers on works';
      END IF;
      RETURN NULL;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER work_counts_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON work_counts
      FOR EACH STATEMENT EXECUTE FUNCTION work_counts_guard();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER IF EXISTS work_counts_add ON works');
  await knex.raw('DROP TRIGGER IF EXISTS work_counts_remove ON works');
  await knex.raw('DROP TRIGGER IF EXISTS work_counts_move ON works');
  await knex.raw('DROP TRIGGER IF EXISTS work_counts_clear ON works');
  await knex.raw('DROP TABLE IF EXISTS work_counts');
  await knex.raw('DROP FUNCTION IF EXISTS work_counts_change, work_counts_move, work_counts_clear, work_counts_guard');
}
