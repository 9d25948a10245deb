import type { Knex } from 'knex';

const BATCH = 5000;

/**
 * Deletes delivery attempts older than the retention (contract §7: kept at least 30 days; the configuration
 * refuses less). Deletes in batches so a large backlog never holds long locks. Returns how many went.
 */
export async function pruneWebhookAttempts(db: Knex, retentionDays: number): Promise<number> {
  const days = Math.max(30, retentionDays);
  let total = 0;
  for (;;) {
    const { rowCount } = await db.raw(
      `DELETE FROM webhook_attempts WHERE id IN (
         SELECT id FROM webhook_attempts WHERE created_at < now() - make_interval(days => ?) ORDER BY id LIMIT ?)`,
      [days, BATCH],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < BATCH) return total;
  }
}
