import type { Knex } from 'knex';

/**
 * One owner per table. A transaction keeps the typed anchor payload it was confirmed with (what finalization
 * indexes and the chain call commits to), not the whole Redis quote; and a repository reads another domain's
 * rows only through a view that domain publishes here, so each table is named in SQL by one module.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('transactions', (t) => {
    t.jsonb('anchor');
  });
  await knex.raw(`
    UPDATE transactions SET anchor = jsonb_build_object(
      'jobId', quote->'session'->>'jobId',
      'commitment', quote->>'commitment',
      'mediaHash', quote->>'mediaHash',
      'merkleRoot', quote->>'merkleRoot',
      'audioSize', (quote->>'audioSize')::bigint,
      'audioKey', quote->'session'->>'audioKey',
      'title', quote->'session'->>'title',
      'filename', quote->'session'->>'filename',
      'creators', quote->'session'->'creators',
      'reusedAudio', (quote->'session'->'reusedAudio') IS NOT NULL)`);
  await knex.schema.alterTable('transactions', (t) => {
    t.dropNullable('anchor');
    t.dropColumn('quote');
  });
  // published by organizations/ for the key lookup (api-keys/repo)
  await knex.raw(`CREATE VIEW organization_statuses AS SELECT id, status FROM organizations`);
  // published by api-keys/ for recording and signing deliveries (webhooks/repo)
  await knex.raw(`CREATE VIEW api_key_webhooks AS SELECT id, webhook_url, webhook_secret_encrypted FROM api_keys`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`DROP VIEW api_key_webhooks`);
  await knex.raw(`DROP VIEW organization_statuses`);
  await knex.schema.alterTable('transactions', (t) => {
    t.jsonb('quote');
  });
  // the quote's price and expiry are gone: what the anchor kept is put back where the quote held it
  await knex.raw(`
    UPDATE transactions SET quote = jsonb_build_object(
      'commitment', anchor->>'commitment', 'mediaHash', anchor->>'mediaHash', 'merkleRoot', anchor->>'merkleRoot',
      'audioSize', (anchor->>'audioSize')::bigint,
      'session', jsonb_build_object('jobId', anchor->>'jobId', 'audioKey', anchor->>'audioKey', 'title', anchor->>'title',
        'filename', anchor->>'filename', 'creators', anchor->'creators'))`);
  await knex.schema.alterTable('transactions', (t) => {
    t.dropNullable('quote');
    t.dropColumn('anchor');
  });
}
