import type { Knex } from 'knex';

/**
 * A `work_registered` event's access code, sealed, is kept on its delivery rather than on the event: it is read
 * only to deliver it and dropped in the very row update that records the delivery delivered or dead (one row
 * written per attempt, not two), and an event whose key has no webhook URL (no delivery, so nobody could ever be
 * sent the code) no longer keeps a decryptable copy: only the work's SHA-256 of it (docs/api.md). Codes of
 * deliveries still pending move over; the others are dropped with the column: those of events without a delivery,
 * and any left on the events of deliveries that died or were delivered before e918803 (which began clearing them),
 * whose revival sends `access_code: null`, as a revival of any dead delivery has since then. A constraint keeps the
 * rule from now on: a code only on a pending delivery (NOT VALID: the rows before are so by construction, and a
 * large table is not scanned under the lock).
 *
 * Deploying: the release applies this before the new processes start. Processes of the previous release still
 * running meanwhile fail their next delivery load, attempt record or event record (the column is gone): each is a
 * failed job retried by the new processes (a delivery already POSTed may be sent again, which receivers absorb by
 * its transaction id). Rolling the code back needs this migration's `down` first. The locks wait 5 s at most
 * (the release fails and is run again, rather than stall the tables behind a long read).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw("SET LOCAL lock_timeout = '5s'");
  await knex.raw('ALTER TABLE webhook_deliveries ADD COLUMN sealed_access_code text');
  await knex.raw(
    `UPDATE webhook_deliveries d SET sealed_access_code = e.sealed_access_code
       FROM events e
      WHERE e.id = d.event_id AND e.sealed_access_code IS NOT NULL AND d.status = 'pending'`,
  );
  await knex.raw(
    `ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_sealed_only_pending
       CHECK (sealed_access_code IS NULL OR status = 'pending') NOT VALID`,
  );
  await knex.raw('ALTER TABLE events DROP COLUMN sealed_access_code');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("SET LOCAL lock_timeout = '5s'");
  await knex.raw('ALTER TABLE events ADD COLUMN sealed_access_code text');
  await knex.raw(
    `UPDATE events e SET sealed_access_code = d.sealed_access_code
       FROM webhook_deliveries d
      WHERE d.event_id = e.id AND d.sealed_access_code IS NOT NULL`,
  );
  await knex.raw('ALTER TABLE webhook_deliveries DROP COLUMN sealed_access_code');
}
