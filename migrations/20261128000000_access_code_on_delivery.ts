import type { Knex } from 'knex';

/**
 * A `work_registered` event's access code, sealed, is kept on its delivery rather than on the event: it is read
 * only to deliver it and dropped in the very row update that records the delivery delivered or dead (one row
 * written per attempt, not two), and an event whose key has no webhook URL (no delivery, so nobody could ever be
 * sent the code) no longer keeps a decryptable copy: only the work's SHA-256 of it (docs/api.md). Codes of
 * deliveries still pending move over; those of events without a delivery are dropped with the column.
 *
 * Processes of the previous release that still run while this applies fail their next delivery load or event
 * record (the column is gone) and retry it as a failed statement, done by the processes of this release.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE webhook_deliveries ADD COLUMN sealed_access_code text');
  await knex.raw(
    `UPDATE webhook_deliveries d SET sealed_access_code = e.sealed_access_code
       FROM events e
      WHERE e.id = d.event_id AND e.sealed_access_code IS NOT NULL AND d.status = 'pending'`,
  );
  await knex.raw('ALTER TABLE events DROP COLUMN sealed_access_code');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE events ADD COLUMN sealed_access_code text');
  await knex.raw(
    `UPDATE events e SET sealed_access_code = d.sealed_access_code
       FROM webhook_deliveries d
      WHERE d.event_id = e.id AND d.sealed_access_code IS NOT NULL`,
  );
  await knex.raw('ALTER TABLE webhook_deliveries DROP COLUMN sealed_access_code');
}
