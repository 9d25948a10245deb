import type { Knex } from 'knex';

/**
 * Confirmed work (transactions and their steps), the finalized index (works and versions), the events it
 * produced and their webhook deliveries, and the per-network counters the remark dialect needs.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('transactions', (t) => {
    t.uuid('id').primary();
    t.uuid('organization_id').notNullable().references('organizations.id');
    t.uuid('api_key_id').notNullable().references('api_keys.id');
    t.text('network').notNullable();
    t.text('type').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    t.text('current_step').notNullable().defaultTo('validating');
    t.jsonb('steps').notNullable();
    // Everything the quote bound: commitment, metadata, audio object, price lines.
    t.jsonb('quote').notNullable();
    t.bigInteger('price_credits').notNullable();
    t.bigInteger('ats_id');
    t.integer('version');
    t.uuid('work_id');
    t.text('external_user_ref');
    // The one signed extrinsic of this transaction, kept before it is sent, so a retry resends the same bytes.
    t.text('extrinsic_hex');
    t.text('tx_hash');
    t.integer('relayer_nonce');
    t.integer('submitted_at_block');
    t.text('block_hash');
    t.integer('block_number');
    t.integer('extrinsic_index');
    t.jsonb('result');
    t.timestamp('finalized_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['organization_id', 'created_at']);
    t.index(['status', 'updated_at']);
  });
  await knex.raw(`ALTER TABLE transactions
    ADD CONSTRAINT transactions_type_check CHECK (type IN ('register', 'add_version')),
    ADD CONSTRAINT transactions_status_check CHECK (status IN ('pending', 'submitted', 'in_block', 'finalized', 'failed')),
    ADD CONSTRAINT transactions_network_check CHECK (network IN ('testnet', 'mainnet'))`);

  await knex.schema.createTable('ats_counters', (t) => {
    t.text('network').primary();
    t.bigInteger('next_id').notNullable();
  });
  await knex('ats_counters').insert([
    { network: 'testnet', next_id: 0 },
    { network: 'mainnet', next_id: 0 },
  ]);

  await knex.schema.createTable('relayer_nonces', (t) => {
    t.text('network').notNullable();
    t.text('address').notNullable();
    t.bigInteger('next_nonce').notNullable();
    t.primary(['network', 'address']);
  });

  await knex.schema.createTable('works', (t) => {
    t.uuid('id').primary();
    t.uuid('organization_id').notNullable().references('organizations.id');
    t.text('network').notNullable();
    t.bigInteger('ats_id').notNullable();
    t.text('owner').notNullable();
    t.text('title').notNullable();
    t.text('asset_filename').notNullable();
    t.integer('latest_version').notNullable();
    t.text('latest_commitment').notNullable();
    t.text('external_user_ref');
    t.specificType('access_code_hash', 'bytea');
    t.boolean('has_files').notNullable().defaultTo(true);
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('latest_version_at', { useTz: true }).notNullable();
    t.unique(['network', 'ats_id']);
    t.index(['organization_id', 'network', 'created_at', 'id']);
    t.index(['organization_id', 'external_user_ref', 'created_at', 'id']);
  });

  await knex.schema.createTable('work_versions', (t) => {
    t.uuid('work_id').notNullable().references('works.id');
    t.integer('version').notNullable();
    t.uuid('transaction_id').notNullable().unique().references('transactions.id');
    t.text('commitment').notNullable();
    t.text('media_hash').notNullable();
    t.text('merkle_root').notNullable();
    t.text('title').notNullable();
    t.text('filename').notNullable();
    t.jsonb('creators').notNullable();
    t.text('audio_key').notNullable();
    t.bigInteger('audio_size').notNullable();
    t.text('tx_hash').notNullable();
    t.integer('block_number').notNullable();
    t.text('block_hash').notNullable();
    t.integer('extrinsic_index').notNullable();
    t.timestamp('finalized_at', { useTz: true }).notNullable();
    t.primary(['work_id', 'version']);
  });

  await knex.schema.createTable('events', (t) => {
    t.uuid('id').primary();
    t.uuid('transaction_id').notNullable().unique().references('transactions.id');
    t.uuid('organization_id').notNullable().references('organizations.id');
    t.uuid('api_key_id').notNullable().references('api_keys.id');
    t.text('type').notNullable();
    t.jsonb('payload').notNullable();
    // access_code travels only inside the sealed payload field below, never in clear.
    t.text('sealed_access_code');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.uuid('id').primary();
    t.uuid('event_id').notNullable().unique().references('events.id');
    t.uuid('api_key_id').notNullable().references('api_keys.id');
    t.text('url').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('last_status_code');
    t.text('last_error');
    t.timestamp('next_attempt_at', { useTz: true });
    t.timestamp('delivered_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['status', 'updated_at']);
  });
  await knex.raw(
    `ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'delivered', 'dead'))`,
  );

  await knex.schema.createTable('webhook_attempts', (t) => {
    t.bigIncrements('id').primary();
    t.uuid('delivery_id').notNullable().references('webhook_deliveries.id');
    t.integer('attempt').notNullable();
    t.integer('status_code');
    t.integer('duration_ms').notNullable();
    t.text('error');
    t.timestamp('next_attempt_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['delivery_id', 'attempt']);
    t.index(['created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(
    'DROP TABLE IF EXISTS webhook_attempts, webhook_deliveries, events, work_versions, works, relayer_nonces, ats_counters, transactions CASCADE',
  );
}
