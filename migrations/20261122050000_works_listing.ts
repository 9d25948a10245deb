import type { Knex } from 'knex';

/**
 * The listing of every work of an organization, on both networks (GET /v1/works without `network`), walks
 * this index backwards: newest first by created_at, then id, from the cursor on. The network and ref listings
 * already have theirs (organization_id, network | external_user_ref, created_at, id).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('works', (t) => {
    t.index(['organization_id', 'created_at', 'id'], 'works_organization_created_index');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('works', (t) => {
    t.dropIndex(['organization_id', 'created_at', 'id'], 'works_organization_created_index');
  });
}
