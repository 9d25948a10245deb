import type { Knex } from 'knex';

/**
 * The chain a network's state belongs to. `chain_genesis` records the genesis hash the database's
 * submissions were made on, and each submission its chain's genesis: a node of another chain (a local chain
 * started afresh, a misconfigured URL) is then detected (chain-identity.ts) instead of refusing every
 * payment. A nonce is unique among the extrinsics still on their way only (signed, in a block not yet
 * final): a finalized one is history, and a chain started afresh uses its nonces again.
 * `transactions.submit_after` spaces out the re-sending of a call after refusals that were not its own;
 * `transactions.owner_nonce` is the `ats` owner nonce its call was last signed over.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('chain_genesis', (t) => {
    t.text('network').primary();
    t.text('genesis_hash').notNullable();
    t.timestamp('recorded_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.alterTable('chain_submissions', (t) => {
    t.text('genesis_hash');
  });
  await knex.raw('DROP INDEX chain_submissions_live_nonce');
  await knex.raw(
    `CREATE UNIQUE INDEX chain_submissions_live_nonce ON chain_submissions (network, relayer, nonce) WHERE status IN ('signed', 'in_block')`,
  );
  await knex.schema.alterTable('transactions', (t) => {
    t.timestamp('submit_after', { useTz: true });
    // `ats`: the owner nonce the call was last signed over (nonces.ts)
    t.bigInteger('owner_nonce');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('transactions', (t) => {
    t.dropColumn('submit_after');
    t.dropColumn('owner_nonce');
  });
  await knex.raw('DROP INDEX chain_submissions_live_nonce');
  await knex.raw(
    `CREATE UNIQUE INDEX chain_submissions_live_nonce ON chain_submissions (network, relayer, nonce) WHERE status NOT IN ('expired', 'rejected')`,
  );
  await knex.schema.alterTable('chain_submissions', (t) => {
    t.dropColumn('genesis_hash');
  });
  await knex.schema.dropTable('chain_genesis');
}
