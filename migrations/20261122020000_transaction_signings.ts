import type { Knex } from 'knex';

/** How many times a transaction's extrinsic was signed: an expired, never-included one is signed again once. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('transactions', (t) => {
    t.integer('signings').notNullable().defaultTo(0);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('transactions', (t) => t.dropColumn('signings'));
}
