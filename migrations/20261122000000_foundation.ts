import type { Knex } from 'knex';

/**
 * Organizations, their wallets and API keys, and the credit ledger.
 *
 * The ledger is append-only and the only way a balance changes: inserting a row adds its signed
 * amount to organizations.credit_balance inside the same statement (trigger), under the row lock
 * that serialises concurrent debits, and the CHECK on credit_balance refuses any overdraft.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('organizations', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('name').notNullable();
    t.text('status').notNullable().defaultTo('active');
    t.bigInteger('credit_balance').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw(`ALTER TABLE organizations
    ADD CONSTRAINT organizations_status_check CHECK (status IN ('active', 'suspended')),
    ADD CONSTRAINT organizations_credit_balance_non_negative CHECK (credit_balance >= 0)`);

  await knex.schema.createTable('wallets', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.text('network').notNullable();
    t.text('address').notNullable();
    t.text('public_key').notNullable();
    t.text('seed_encrypted').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['organization_id', 'network']);
  });
  await knex.raw(`ALTER TABLE wallets ADD CONSTRAINT wallets_network_check CHECK (network IN ('testnet', 'mainnet'))`);

  await knex.schema.createTable('api_keys', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('prefix').notNullable();
    t.specificType('token_hash', 'bytea').notNullable().unique();
    t.specificType('scopes', 'text[]').notNullable();
    t.text('webhook_url');
    t.text('webhook_secret_encrypted').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_used_at', { useTz: true });
    t.timestamp('revoked_at', { useTz: true });
    t.index(['organization_id', 'created_at']);
  });
  await knex.raw(`ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check
    CHECK (cardinality(scopes) >= 1 AND scopes <@ ARRAY['works:register', 'works:update', 'works:read']::text[])`);

  await knex.schema.createTable('credit_ledger', (t) => {
    t.bigIncrements('id').primary();
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.text('kind').notNullable();
    t.bigInteger('amount').notNullable();
    t.bigInteger('balance_after').notNullable();
    t.text('reference');
    t.text('reason');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['organization_id', 'id']);
  });
  await knex.raw(`ALTER TABLE credit_ledger
    ADD CONSTRAINT credit_ledger_kind_check CHECK (kind IN ('grant', 'debit', 'refund', 'adjustment')),
    ADD CONSTRAINT credit_ledger_sign_check CHECK (
      (kind IN ('grant', 'refund') AND amount > 0) OR (kind = 'debit' AND amount < 0) OR (kind = 'adjustment' AND amount <> 0)),
    ADD CONSTRAINT credit_ledger_balance_non_negative CHECK (balance_after >= 0)`);
  // A charge or refund for one thing happens once, however often a job retries.
  await knex.raw(`CREATE UNIQUE INDEX credit_ledger_once ON credit_ledger (organization_id, kind, reference) WHERE reference IS NOT NULL`);

  await knex.raw(`
    CREATE FUNCTION credit_ledger_apply() RETURNS trigger AS $$
    BEGIN
      UPDATE organizations SET credit_balance = credit_balance + NEW.amount, updated_at = now()
        WHERE id = NEW.organization_id
        RETURNING credit_balance INTO NEW.balance_after;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'organization % does not exist', NEW.organization_id USING ERRCODE = 'foreign_key_violation';
      END IF;
      RETURN NEW;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER credit_ledger_apply BEFORE INSERT ON credit_ledger
      FOR EACH ROW EXECUTE FUNCTION credit_ledger_apply();

    CREATE FUNCTION credit_ledger_append_only() RETURNS trigger AS $$
    BEGIN
      RAISE EXCEPTION 'credit_ledger is append-only';
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER credit_ledger_append_only BEFORE UPDATE OR DELETE ON credit_ledger
      FOR EACH ROW EXECUTE FUNCTION credit_ledger_append_only();

    -- The balance is only ever moved by the ledger trigger above.
    CREATE FUNCTION organizations_balance_guard() RETURNS trigger AS $$
    BEGIN
      IF TG_OP = 'INSERT' AND NEW.credit_balance <> 0 THEN
        RAISE EXCEPTION 'an organization starts at zero; grant credits through credit_ledger';
      END IF;
      IF TG_OP = 'UPDATE' AND NEW.credit_balance IS DISTINCT FROM OLD.credit_balance AND pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'credit_balance changes only through credit_ledger';
      END IF;
      RETURN NEW;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER organizations_balance_guard BEFORE INSERT OR UPDATE ON organizations
      FOR EACH ROW EXECUTE FUNCTION organizations_balance_guard();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE IF EXISTS credit_ledger, api_keys, wallets, organizations CASCADE');
  await knex.raw('DROP FUNCTION IF EXISTS credit_ledger_apply, credit_ledger_append_only, organizations_balance_guard CASCADE');
}
