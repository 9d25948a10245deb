import type { Knex } from 'knex';
import { Coalescer } from '../coalesce';
import { prepared, rowsParameter } from '../db/knex';
import type { AttemptRecord, AttemptRow, DeadDeliveryRow, Delivery, EventDeliveryRow, EventRow } from './types';

export type { AttemptRecord, DeadDeliveryRow, Delivery, EventRow } from './types';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const LOAD = `
  SELECT d.id, d.status, d.url, d.current_job_id, d.api_key_id, e.id AS event_id, e.type, e.transaction_id,
         e.organization_id, e.payload, d.sealed_access_code, e.traceparent, e.confirmed_at, k.webhook_secret_encrypted
    FROM webhook_deliveries d
    JOIN events e ON e.id = d.event_id
    JOIN api_key_webhooks k ON k.id = e.api_key_id
   WHERE d.id = ANY($1::uuid[])`;

// Each delivery's new state and its attempt's row in one statement: atomic without a transaction's extra round
// trips, and one statement for every attempt of the batch. An access code is kept, decryptable, only until its
// delivery was delivered or died (then only the work's SHA-256 of it), dropped in the same row update.
const RECORD = `
  WITH a AS (
    SELECT * FROM unnest(CAST($1 AS uuid[]), CAST($2 AS text[]), CAST($3 AS text[]), CAST($4 AS integer[]), CAST($5 AS text[]),
                         CAST($6 AS integer[]), CAST($7 AS timestamptz[]), CAST($8 AS uuid[]), CAST($9 AS text[]), CAST($10 AS uuid[]),
                         CAST($11 AS uuid[]), CAST($12 AS text[]))
      AS a(delivery_id, status, outcome, status_code, error, duration_ms, next_attempt_at, event_id, event, transaction_id, api_key_id, url)
  ), d AS (
    UPDATE webhook_deliveries w
       SET attempts = w.attempts + 1, status = a.status, last_status_code = a.status_code, last_error = a.error,
           next_attempt_at = a.next_attempt_at, delivered_at = CASE WHEN a.status = 'delivered' THEN now() END, updated_at = now(),
           sealed_access_code = CASE WHEN a.status IN ('delivered', 'dead') THEN NULL ELSE w.sealed_access_code END
      FROM a
     WHERE w.id = a.delivery_id
    RETURNING w.id, w.attempts
  )
  INSERT INTO webhook_attempts (delivery_id, event_id, event, transaction_id, api_key_id, url, attempt, status_code, duration_ms, error, outcome, next_attempt_at)
  SELECT a.delivery_id, a.event_id, a.event, a.transaction_id, a.api_key_id, a.url, d.attempts, a.status_code, a.duration_ms, a.error, a.outcome, a.next_attempt_at
    FROM a JOIN d ON d.id = a.delivery_id
  RETURNING delivery_id, attempt`;

/**
 * The delivery jobs' reads and writes. A worker process runs many deliveries at once (WEBHOOK_CONCURRENCY):
 * the loads, and the attempts' records, that arrive while one statement is running go together in the next
 * (coalesce.ts), so PostgreSQL sees one statement and one commit per batch rather than per delivery. Every
 * attempt's row is still written with its delivery's new state, atomically, before its job moves on.
 */
export class DeliveryRepo {
  private readonly loads: Coalescer<string, Delivery | undefined>;
  private readonly records: Coalescer<AttemptRecord, number | undefined>;

  constructor(db: Knex, options: { maxBatch?: number } = {}) {
    const maxBatch = options.maxBatch ?? 256;
    this.loads = new Coalescer((ids) => loadDeliveries(db, ids), { maxBatch, maxInFlight: 1 });
    // a delivery's attempts never share a statement (its attempt number is counted by the statement)
    this.records = new Coalescer((records) => recordAttempts(db, records), { maxBatch, maxInFlight: 1, key: (r) => r.delivery.id });
  }

  /** The delivery, or undefined when there is none with this id. */
  load(deliveryId: string): Promise<Delivery | undefined> {
    if (!UUID.test(deliveryId)) return Promise.resolve(undefined);
    return this.loads.submit(deliveryId.toLowerCase());
  }

  /** Records the attempt and the delivery's new state; returns the attempt's number within the delivery. */
  async record(record: AttemptRecord): Promise<number> {
    const attempt = await this.records.submit(record);
    if (attempt === undefined) throw new Error(`delivery ${record.delivery.id} no longer exists`);
    return attempt;
  }
}

async function loadDeliveries(db: Knex, ids: readonly string[]): Promise<(Delivery | undefined)[]> {
  const { rows } = await prepared(db, 'webhooks_load', LOAD, [[...ids]]);
  const byId = new Map<string, Delivery>((rows as Record<string, any>[]).map((r) => [r.id, toDelivery(r)]));
  return ids.map((id) => byId.get(id));
}

async function recordAttempts(db: Knex, records: readonly AttemptRecord[]): Promise<(number | undefined)[]> {
  const column = <T>(pick: (r: AttemptRecord) => T) => records.map(pick);
  const columns: unknown[] = [
    column((r) => r.delivery.id),
    column((r) => r.status),
    column((r) => r.outcome),
    column((r) => r.statusCode),
    column((r) => r.error),
    column((r) => r.durationMs),
    column((r) => r.nextAttemptAt),
    column((r) => r.delivery.eventId),
    column((r) => r.delivery.event),
    column((r) => r.delivery.transactionId),
    column((r) => r.delivery.apiKeyId),
    column((r) => r.delivery.url),
  ];
  const { rows } = await prepared(db, 'webhooks_record', RECORD, columns);
  const attempts = new Map<string, number>((rows as { delivery_id: string; attempt: number }[]).map((r) => [r.delivery_id, r.attempt]));
  return records.map((r) => attempts.get(r.delivery.id.toLowerCase()));
}

const toDelivery = (r: Record<string, any>): Delivery => ({
  id: r.id,
  status: r.status,
  url: r.url,
  currentJobId: r.current_job_id,
  eventId: r.event_id,
  event: r.type,
  transactionId: r.transaction_id,
  organizationId: r.organization_id,
  apiKeyId: r.api_key_id,
  payload: r.payload,
  sealedAccessCode: r.sealed_access_code,
  sealedWebhookSecret: r.webhook_secret_encrypted,
  traceparent: r.traceparent ?? null,
  confirmedAt: r.confirmed_at ?? null,
});

// Events and deliveries outside the delivery jobs' hot path: recording, dead letters, reconciling, pruning.

// The event, and its delivery when the key that made the write has a webhook URL (read through the view api-keys
// publishes), in one statement: the outcome's SQL transaction holds its row locks one round trip instead of three.
const EVENT_COLUMNS = 'id, transaction_id, organization_id, api_key_id, type, payload, traceparent, confirmed_at';
const RECORD_EVENTS = `
  WITH e AS (
    INSERT INTO events (${EVENT_COLUMNS})
    SELECT ${EVENT_COLUMNS} FROM json_populate_recordset(NULL::events, $1::json)
    RETURNING id, api_key_id
  ), d AS (
    INSERT INTO webhook_deliveries (id, event_id, api_key_id, url, sealed_access_code)
    SELECT x.delivery_id, e.id, e.api_key_id, k.webhook_url, x.sealed_access_code
      FROM e JOIN json_to_recordset($1::json) AS x(id uuid, delivery_id uuid, sealed_access_code text) ON x.id = e.id
      JOIN api_key_webhooks k ON k.id = e.api_key_id
     WHERE k.webhook_url <> ''
    RETURNING event_id, url
  )
  SELECT event_id, url FROM d`;

/**
 * Inserts the events and, for each whose key has a webhook URL, its delivery (`deliveryId`), in one statement
 * however many; returns each delivery's URL by its event's id (an event without one is not there). A sealed access
 * code is kept on the delivery, the only reader of it: an event without a delivery keeps none. Once per
 * finalized or failed transaction, in its SQL transaction: prepared once per connection (db/knex.ts).
 */
export async function insertEventsAndDeliveries(
  trx: Knex.Transaction,
  events: readonly (EventRow & { readonly deliveryId: string })[],
): Promise<Map<string, string>> {
  const rows = events.map((e) => ({
    id: e.id,
    delivery_id: e.deliveryId,
    transaction_id: e.transactionId,
    organization_id: e.organizationId,
    api_key_id: e.apiKeyId,
    type: e.type,
    payload: e.payload,
    sealed_access_code: e.sealedAccessCode,
    traceparent: e.traceparent,
    confirmed_at: e.confirmedAt,
  }));
  const { rows: delivered } = await prepared(trx, 'events_record_many', RECORD_EVENTS, [rowsParameter(rows)]);
  return new Map(delivered.map((r: { event_id: string; url: string }) => [r.event_id, r.url]));
}

export async function deadDeliveries(db: Knex, id?: string): Promise<DeadDeliveryRow[]> {
  const query = db('webhook_deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .where('d.status', 'dead')
    .orderBy('d.updated_at', 'desc')
    .select('d.id', 'e.type as event', 'e.transaction_id', 'd.url', 'd.attempts', 'd.last_status_code', 'd.last_error', 'd.updated_at');
  if (id !== undefined) query.where('d.id', id);
  return query;
}

/** What a delivery's jobs are labelled with (queue/labels.ts), from its row and its event's; undefined if unknown. */
export async function labelSource(
  db: Knex,
  id: string,
): Promise<Pick<Delivery, 'organizationId' | 'transactionId' | 'event' | 'url'> | undefined> {
  return db('webhook_deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .where('d.id', id)
    .first('e.organization_id as organizationId', 'e.transaction_id as transactionId', 'e.type as event', 'd.url');
}

/** How many deliveries are dead (dead-lettered) now. */
export async function deadDeliveryCount(db: Knex): Promise<number> {
  const row = await db('webhook_deliveries').where({ status: 'dead' }).first(db.raw('count(*)::int AS count'));
  return row.count;
}

/** A dead delivery back to pending under a new current job; false when it was not dead. */
export async function reviveDead(db: Knex, id: string, jobId: string): Promise<boolean> {
  const revived = await db('webhook_deliveries')
    .where({ id, status: 'dead' })
    .update({ status: 'pending', current_job_id: jobId, next_attempt_at: null, updated_at: db.fn.now() })
    .returning('id');
  return revived.length > 0;
}

/** Undoes a revival whose job could not be enqueued (only while that job is still the current one). */
export async function markDeadAgain(db: Knex, id: string, jobId: string): Promise<void> {
  await db('webhook_deliveries').where({ id, current_job_id: jobId }).update({ status: 'dead', updated_at: db.fn.now() });
}

/** Pending deliveries untouched for `idleSeconds`, the longest idle first. */
export async function idlePendingDeliveries(
  db: Knex,
  idleSeconds: number,
  limit: number,
): Promise<{ id: string; currentJobId: string | null }[]> {
  const rows = await db('webhook_deliveries')
    .where({ status: 'pending' })
    .where('updated_at', '<', db.raw(`now() - make_interval(secs => ?)`, [idleSeconds]))
    .orderBy('updated_at')
    .limit(limit)
    .select('id', 'current_job_id');
  return rows.map((r: { id: string; current_job_id: string | null }) => ({ id: r.id, currentJobId: r.current_job_id }));
}

/** Makes `jobId` the pending delivery's current job, if its current job is still `expected`; false otherwise. */
export async function claimDelivery(db: Knex, id: string, expected: string | null, jobId: string): Promise<boolean> {
  const claimed = await db('webhook_deliveries')
    .where({ id, status: 'pending' })
    .where((q) => (expected ? q.where({ current_job_id: expected }) : q.whereNull('current_job_id')))
    .update({ current_job_id: jobId, updated_at: db.fn.now() });
  return claimed > 0;
}

/** Of these deliveries, those pending and never enqueued (no current job), with their URL. */
export async function unclaimedDestinations(db: Knex, ids: readonly string[]): Promise<{ id: string; url: string }[]> {
  return db('webhook_deliveries').whereIn('id', ids).where({ status: 'pending' }).whereNull('current_job_id').select('id', 'url');
}

/** Makes each job the current one of its delivery, if that delivery still has none; returns those it became. */
export async function claimUnclaimed(db: Knex, claims: readonly { id: string; jobId: string }[]): Promise<Set<string>> {
  if (!claims.length) return new Set();
  const { rows } = await db.raw(
    `UPDATE webhook_deliveries d SET current_job_id = c.job_id, updated_at = now()
       FROM unnest(?::uuid[], ?::text[]) AS c(id, job_id)
      WHERE d.id = c.id AND d.status = 'pending' AND d.current_job_id IS NULL
     RETURNING d.id`,
    [claims.map((c) => c.id), claims.map((c) => c.jobId)],
  );
  return new Set((rows as { id: string }[]).map((r) => r.id));
}

/** A transaction's events with their deliveries, oldest first, and every attempt at them in order (support's view). */
export async function eventHistory(db: Knex, transactionId: string): Promise<{ events: EventDeliveryRow[]; attempts: AttemptRow[] }> {
  const columns =
    'e.id, e.type, e.payload, e.created_at, d.id AS delivery_id, d.url, d.status, d.attempts, d.next_attempt_at, d.delivered_at';
  const events = await db('events as e')
    .leftJoin('webhook_deliveries as d', 'd.event_id', 'e.id')
    .where('e.transaction_id', transactionId)
    .orderBy('e.created_at')
    .select(db.raw(columns));
  // through the event's delivery: attempts are indexed by delivery, not by transaction
  const attempts = await db('webhook_attempts')
    .whereIn(
      'delivery_id',
      db('webhook_deliveries as d').join('events as e', 'e.id', 'd.event_id').where('e.transaction_id', transactionId).select('d.id'),
    )
    .orderBy(['delivery_id', 'attempt'])
    .select('delivery_id', 'attempt', 'created_at', 'status_code', 'duration_ms', 'error', 'outcome', 'next_attempt_at');
  return { events, attempts };
}

const PRUNE_BATCH = 5000;

/** Deletes attempts older than `days`, in batches so a large backlog never holds long locks. */
export async function deleteAttemptsOlderThan(db: Knex, days: number): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await db.raw(
      `DELETE FROM webhook_attempts WHERE id IN (
         SELECT id FROM webhook_attempts WHERE created_at < now() - make_interval(days => ?) ORDER BY id LIMIT ?)`,
      [days, PRUNE_BATCH],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < PRUNE_BATCH) return total;
  }
}
