import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { SecretBox } from '../crypto/secret-box';
import { insertEventsAndDeliveries, type Delivery } from './repo';
import { webhookHost, type DeliveryLabels } from '../queue/labels';

export type EventType = 'work_registered' | 'work_updated' | 'work_failed';

export interface NewEvent {
  readonly transactionId: string;
  readonly organizationId: string;
  readonly apiKeyId: string;
  readonly type: EventType;
  /** The payload without access_code, which is passed separately and kept only sealed. */
  readonly payload: Record<string, unknown>;
  readonly accessCode?: string;
  /** The transaction's trace, which the event's delivery attempts join. */
  readonly traceparent: string | null;
  /** When the transaction was confirmed (its creation): the start of the confirm → webhook latency. */
  readonly confirmedAt: Date;
}

export const accessCodeAad = (eventId: string) => `access-code:${eventId}`;

/** A delivery just recorded: its id, and the labels its jobs carry for support staff (queue/labels.ts). */
export interface RecordedDelivery {
  readonly id: string;
  readonly labels: DeliveryLabels;
}

/** A delivery's labels: its organization, transaction and event, and of its URL the host alone. */
export function labelsOf(d: Pick<Delivery, 'organizationId' | 'transactionId' | 'event' | 'url'>): DeliveryLabels {
  return { organizationId: d.organizationId, transactionId: d.transactionId, event: d.event, host: webhookHost(d.url) };
}

/**
 * Records the one event of each transaction outcome and, when the key that made the write has a webhook URL,
 * its delivery, in one statement however many. Runs inside the caller's SQL transaction; returns, in the order
 * of `events`, each delivery to enqueue after commit (null for an event without one).
 */
export async function recordEvents(
  trx: Knex.Transaction,
  box: SecretBox,
  events: readonly NewEvent[],
): Promise<(RecordedDelivery | null)[]> {
  if (events.length === 0) return [];
  const rows = events.map((event) => {
    const id = randomUUID();
    const sealedAccessCode = event.accessCode ? box.seal(Buffer.from(event.accessCode), accessCodeAad(id)) : null;
    return { ...event, id, sealedAccessCode, deliveryId: randomUUID() };
  });
  const urls = await insertEventsAndDeliveries(trx, rows);
  return rows.map((row) => {
    const url = urls.get(row.id);
    return url === undefined ? null : { id: row.deliveryId, labels: labelsOf({ ...row, event: row.type, url }) };
  });
}

/** `recordEvents` for one outcome. */
export async function recordEvent(trx: Knex.Transaction, box: SecretBox, event: NewEvent): Promise<RecordedDelivery | null> {
  return (await recordEvents(trx, box, [event]))[0]!;
}
