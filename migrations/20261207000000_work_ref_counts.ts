import type { Knex } from 'knex';

/**
 * A ref-filtered listing's `total_count` without a scan, as 20261122060000's work_counts gives the unfiltered and
 * network-filtered ones: how many works each end-user ref of an organization has on each network, kept by the
 * database in the same transaction as the rows. Before, a ref's works were counted on its index at every page: a
 * ref holding a catalog of 500,000 works cost about 50 ms of PostgreSQL's time a page, on both cores
 * (docs/performance.md, section 51), and an end-user session's listing is always a ref's.
 *
 * The same scheme as work_counts (its comment has the reasons): up to SLOTS counter rows per organization, ref and
 * network, a transaction adding to the slot of its connection; one statement-level trigger per INSERT and DELETE
 * over the transition table, its upserts in key order; a row trigger for a move (a work never changes its ref or
 * organization in the service, but a hand-made UPDATE is counted right); TRUNCATE empties the counts; no other
 * writer. Works without a ref are not counted here.
 *
 * Lock order: a ref's counter row is only ever locked by a transaction that already holds its organization and
 * network's work_counts slot, so the ref counts add no lock a finalization group could wait on in a new order
 * (transactions/outcomes.ts sorts its works by organization and network for that slot). PostgreSQL fires the triggers
 * of one event in the order of their names, so an insert or a delete takes the slot (work_counts_add, _remove) before
 * the ref's counter (work_ref_counts_add, _remove); a move of a work to another ref alone, which work_counts_move does
 * not see, takes its slot first with an upsert that adds nothing. (A hand-made UPDATE of many works still locks each
 * row's slot in the order it meets the rows, as work_counts_move always has: on a live system it may deadlock with a
 * finalization group, which is then finalized transaction by transaction.)
 *
 * Size: a ref has a row per network and slot its works were written on, at most 16, and a row per work for the many
 * refs with one work (about 190 bytes a row with its key, against about 128 for the work's entry in the ref index a
 * count walked); rows that fall to zero (deletes, which the service does not make) stay.
 *
 * The migration takes the works table's lock, then the organizations' (the new foreign key), within a lock timeout:
 * a release run behind a long transaction fails and is run again, rather than stall every finalization and charge
 * behind it; the backfill then holds both (about a second per 3 million works on 2 cores).
 */
const SLOTS = 16;

export async function up(knex: Knex): Promise<void> {
  await knex.raw("SET LOCAL lock_timeout = '5s'");
  // Held to the end of the migration's transaction: no work is written between the triggers and the backfill.
  await knex.raw('LOCK TABLE works IN SHARE ROW EXCLUSIVE MODE');
  await knex.schema.createTable('work_ref_counts', (t) => {
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.text('external_user_ref').notNullable();
    t.text('network').notNullable();
    t.smallint('slot').notNullable();
    t.bigInteger('works').notNullable();
    // a ref alone (both networks) and a ref on one network read the same rows
    t.primary(['organization_id', 'external_user_ref', 'network', 'slot']);
  });

  await knex.raw(`
    CREATE FUNCTION work_ref_counts_change() RETURNS trigger AS $$
    BEGIN
      INSERT INTO work_ref_counts (organization_id, external_user_ref, network, slot, works)
        SELECT organization_id, external_user_ref, network, pg_backend_pid() % ${SLOTS},
               CASE TG_OP WHEN 'DELETE' THEN -count(*) ELSE count(*) END
        FROM changed WHERE external_user_ref IS NOT NULL
        GROUP BY organization_id, external_user_ref, network ORDER BY organization_id, external_user_ref, network
        ON CONFLICT (organization_id, external_user_ref, network, slot) DO UPDATE SET works = work_ref_counts.works + excluded.works;
      RETURN NULL;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER work_ref_counts_add AFTER INSERT ON works
      REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION work_ref_counts_change();
    CREATE TRIGGER work_ref_counts_remove AFTER DELETE ON works
      REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION work_ref_counts_change();

    CREATE FUNCTION work_ref_counts_move() RETURNS trigger AS $$
    BEGIN
      -- the slots of the organizations and networks first (already held when work_counts_move has run)
      INSERT INTO work_counts (organization_id, network, slot, works)
        SELECT DISTINCT organization_id, network, pg_backend_pid() % ${SLOTS}, 0
        FROM (VALUES (OLD.organization_id, OLD.network), (NEW.organization_id, NEW.network)) AS m(organization_id, network)
        ORDER BY 1, 2
        ON CONFLICT (organization_id, network, slot) DO UPDATE SET works = work_counts.works;
      INSERT INTO work_ref_counts (organization_id, external_user_ref, network, slot, works)
        SELECT organization_id, external_user_ref, network, pg_backend_pid() % ${SLOTS}, works
        FROM (VALUES (OLD.organization_id, OLD.external_user_ref, OLD.network, -1),
                     (NEW.organization_id, NEW.external_user_ref, NEW.network, 1)) AS m(organization_id, external_user_ref, network, works)
        WHERE external_user_ref IS NOT NULL
        ORDER BY 1, 2, 3
        ON CONFLICT (organization_id, external_user_ref, network, slot) DO UPDATE SET works = work_ref_counts.works + excluded.works;
      RETURN NULL;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER work_ref_counts_move AFTER UPDATE OF organization_id, external_user_ref, network ON works
      FOR EACH ROW WHEN (OLD.organization_id IS DISTINCT FROM NEW.organization_id OR OLD.external_user_ref IS DISTINCT FROM NEW.external_user_ref
                         OR OLD.network IS DISTINCT FROM NEW.network)
      EXECUTE FUNCTION work_ref_counts_move();

    CREATE FUNCTION work_ref_counts_clear() RETURNS trigger AS $$
    BEGIN
      DELETE FROM work_ref_counts;
      RETURN NULL;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER work_ref_counts_clear AFTER TRUNCATE ON works
      FOR EACH STATEMENT EXECUTE FUNCTION work_ref_counts_clear();
  `);

  await knex.raw(`
    INSERT INTO work_ref_counts (organization_id, external_user_ref, network, slot, works)
      SELECT organization_id, external_user_ref, network, 0, count(*) FROM works WHERE external_user_ref IS NOT NULL
      GROUP BY organization_id, external_user_ref, network`);

  await knex.raw(`
    CREATE FUNCTION work_ref_counts_guard() RETURNS trigger AS $$
    BEGIN
      IF pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'work_ref_counts changes only through the triggers on works';
      END IF;
      RETURN NULL;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER work_ref_counts_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON work_ref_counts
      FOR EACH STATEMENT EXECUTE FUNCTION work_ref_counts_guard();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("SET LOCAL lock_timeout = '5s'");
  for (const trigger of ['work_ref_counts_add', 'work_ref_counts_remove', 'work_ref_counts_move', 'work_ref_counts_clear'])
    await knex.raw(`DROP TRIGGER IF EXISTS ${trigger} ON works`);
  await knex.raw('DROP TABLE IF EXISTS work_ref_counts');
  await knex.raw('DROP FUNCTION IF EXISTS work_ref_counts_change, work_ref_counts_move, work_ref_counts_clear, work_ref_counts_guard');
}
