import type { Knex } from 'knex';

/**
 * Every webhook attempt as a self-contained row (issue 5): what was sent (event, transaction, key, URL), how it
 * went (status, duration, error, outcome) and when the next one is due, readable without joins and kept after
 * the key's URL changes. `current_job_id` names the one queue job that may attempt a delivery, so a stale job
 * retried by hand never sends alongside the live one.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_attempts', (t) => {
    t.uuid('event_id');
    t.text('event');
    t.uuid('transaction_id');
    t.uuid('api_key_id');
    t.text('url');
    t.text('outcome');
  });
  await knex.raw(`
    UPDATE webhook_attempts a
       SET event_id = d.event_id, event = e.type, transaction_id = e.transaction_id, api_key_id = d.api_key_id, url = d.url,
           outcome = CASE WHEN a.status_code BETWEEN 200 AND 299 THEN 'delivered' WHEN a.next_attempt_at IS NULL THEN 'dead' ELSE 'retry' END
      FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
     WHERE d.id = a.delivery_id`);
  await knex.schema.alterTable('webhook_attempts', (t) => {
    for (const column of ['event_id', 'event', 'transaction_id', 'api_key_id', 'url', 'outcome']) t.dropNullable(column);
    t.index(['transaction_id']);
  });
  await knex.raw(
    `ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_outcome_check CHECK (outcome IN ('delivered', 'retry', 'dead'))`,
  );

  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.text('current_job_id');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => t.dropColumn('current_job_id'));
  await knex.raw('ALTER TABLE webhook_attempts DROP CONSTRAINT IF EXISTS webhook_attempts_outcome_check');
  await knex.schema.alterTable('webhook_attempts', (t) => {
    t.dropIndex(['transaction_id']);
    for (const column of ['event_id', 'event', 'transaction_id', 'api_key_id', 'url', 'outcome']) t.dropColumn(column);
  });
}
