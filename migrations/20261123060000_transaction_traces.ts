import type { Knex } from 'knex';

/**
 * The trace a transaction belongs to: the W3C `traceparent` of the confirm that created it (when tracing is
 * on), so every later step (a chain job re-enqueued by the reconciler after Redis lost its queue, a webhook
 * retried from the dead letters) joins the same trace, and support staff can look the trace up from the
 * transaction's id. Null when the process that confirmed traced nothing. An event keeps its transaction's, so a
 * delivery's attempts join the trace without reading the transaction, and the time it was confirmed, for the
 * confirm → webhook latency (null for events recorded before: not measured).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('transactions', (t) => {
    t.text('traceparent');
  });
  await knex.schema.alterTable('events', (t) => {
    t.text('traceparent');
    t.timestamp('confirmed_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('events', (t) => {
    t.dropColumn('traceparent');
    t.dropColumn('confirmed_at');
  });
  await knex.schema.alterTable('transactions', (t) => t.dropColumn('traceparent'));
}
