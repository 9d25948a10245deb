import type { Knex } from 'knex';
import { deleteAttemptsOlderThan } from './repo';

/**
 * Deletes delivery attempts older than the retention (docs/api.md#delivery-and-retries: kept at least 30 days; the configuration
 * refuses less). Returns how many went.
 */
export function pruneWebhookAttempts(db: Knex, retentionDays: number): Promise<number> {
  return deleteAttemptsOlderThan(db, Math.max(30, retentionDays));
}
