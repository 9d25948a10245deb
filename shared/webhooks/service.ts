import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { SecretBox } from '../crypto/secret-box';

export type EventType = 'work_registered' | 'work_updated' | 'work_failed';

export interface NewEvent {
  readonly transactionId: string;
  readonly organizationId: string;
  readonly apiKeyId: string;
  readonly type: EventType;
  /** The payload without access_code, which is passed separately and kept only sealed. */
  readonly payload: Record<string, unknown>;
  readonly accessCode?: string;
}

export const accessCodeAad = (eventId: string) => `access-code:${eventId}`;

/**
 * Records the one event of a transaction outcome and, when the key that made the write has a webhook URL,
 * its delivery. Runs inside the caller's SQL transaction; returns the delivery id to enqueue after commit.
 */
export async function recordEvent(trx: Knex.Transaction, box: SecretBox, event: NewEvent): Promise<string | null> {
  const id = randomUUID();
  await trx('events').insert({
    id,
    transaction_id: event.transactionId,
    organization_id: event.organizationId,
    api_key_id: event.apiKeyId,
    type: event.type,
    payload: JSON.stringify(event.payload),
    sealed_access_code: event.accessCode ? box.seal(Buffer.from(event.accessCode), accessCodeAad(id)) : null,
  });
  const key = await trx('api_keys').where({ id: event.apiKeyId }).first('webhook_url');
  if (!key?.webhook_url) return null;
  const deliveryId = randomUUID();
  await trx('webhook_deliveries').insert({ id: deliveryId, event_id: id, api_key_id: event.apiKeyId, url: key.webhook_url });
  return deliveryId;
}
