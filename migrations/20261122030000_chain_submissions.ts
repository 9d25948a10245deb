import type { Knex } from 'knex';

/**
 * Batched submission. A transaction now keeps only its own call (signed inside by the owner's wallet);
 * the relayer's extrinsic, one `utility` batch carrying many calls, is a `chain_submissions` row, signed
 * with its nonce and stored before it is sent, so a rerun resends the same bytes or finds them on chain.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('chain_submissions', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('network').notNullable();
    t.text('relayer').notNullable();
    t.bigInteger('nonce').notNullable();
    t.text('extrinsic_hex').notNullable();
    t.text('tx_hash').notNullable();
    t.integer('signed_at_block').notNullable();
    t.integer('items').notNullable();
    // signed: stored, perhaps sent; in_block: included (its block not yet final); finalized; expired: its era
    // ended unincluded; rejected: refused by the pool; retracted blocks send it back to signed.
    t.text('status').notNullable().defaultTo('signed');
    t.text('block_hash');
    t.integer('block_number');
    t.integer('extrinsic_index');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['network', 'status']);
  });
  await knex.raw(`ALTER TABLE chain_submissions
    ADD CONSTRAINT chain_submissions_status_check CHECK (status IN ('signed', 'in_block', 'finalized', 'expired', 'rejected'))`);
  // A nonce carries one live extrinsic; an abandoned one (expired, rejected) hands its nonce back.
  await knex.raw(
    `CREATE UNIQUE INDEX chain_submissions_live_nonce ON chain_submissions (network, relayer, nonce) WHERE status NOT IN ('expired', 'rejected')`,
  );

  await knex.schema.alterTable('transactions', (t) => {
    t.text('call_hex');
    t.uuid('submission_id').references('chain_submissions.id');
    t.integer('batch_index');
    t.dropColumn('extrinsic_hex');
    t.dropColumn('relayer_nonce');
    t.dropColumn('submitted_at_block');
    t.index(['network', 'status', 'submission_id']);
  });
  await knex.raw(`COMMENT ON COLUMN transactions.signings IS 'how many relayer extrinsics carried this transaction''s call'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('transactions', (t) => {
    t.dropIndex(['network', 'status', 'submission_id']);
    t.dropColumn('call_hex');
    t.dropColumn('submission_id');
    t.dropColumn('batch_index');
    t.text('extrinsic_hex');
    t.integer('relayer_nonce');
    t.integer('submitted_at_block');
  });
  await knex.schema.dropTable('chain_submissions');
}
