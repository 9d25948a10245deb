/**
 * The payloads of the service's webhook deliveries (docs/api.md#events), written from their text.
 * Every event echoes the key and organization that made the write and the end-user reference it carried.
 */

/** A network the service registers on. */
export type Network = 'testnet' | 'mainnet';

interface EventBase {
  /** The transaction this event reports; use it as the receiver's idempotency key (a delivery may repeat). */
  readonly transaction_id: string;
  readonly organization_id: string;
  /** The API key that made the write (its webhook URL is where the event goes). */
  readonly api_key_id: string;
  /** The `external_user_ref` of the write, or null when it carried none. */
  readonly external_user_ref: string | null;
  readonly network: Network;
}

interface FinalizedFields {
  readonly ats_id: number;
  /** 0x-prefixed hex of the extrinsic hash. */
  readonly tx_hash: string;
  readonly block_number: number;
  /** 0x-prefixed hex of the block hash. */
  readonly block_hash: string;
  /**
   * `atc_` + 64 hex characters, sent only here and only once, when the work has no `external_user_ref`;
   * null otherwise. The service keeps only its SHA-256: store it now or lose it.
   */
  readonly access_code: string | null;
  /** A link to the transaction on the network's explorer. */
  readonly explorer_url: string;
  /** ISO 8601 UTC. */
  readonly finalized_at: string;
}

/** A registration finalized on chain. */
export interface WorkRegisteredEvent extends EventBase, FinalizedFields {
  readonly event: 'work_registered';
}

/** A new version of a work finalized on chain. */
export interface WorkUpdatedEvent extends EventBase, FinalizedFields {
  readonly event: 'work_updated';
  /** The version number; the registration is version 1. */
  readonly version: number;
}

/** A registration or version failed. The whole pre-debited amount was refunded before this was sent. */
export interface WorkFailedEvent extends EventBase {
  readonly event: 'work_failed';
  /** The work's ats_id for a failed version; null for a failed registration. */
  readonly ats_id: number | null;
  /** A stable code saying why. */
  readonly reason: string;
  /** A human-readable account; do not match on it. */
  readonly message: string;
  /** ISO 8601 UTC. */
  readonly failed_at: string;
}

/** Any event the service delivers, discriminated by `event`. */
export type WebhookEvent = WorkRegisteredEvent | WorkUpdatedEvent | WorkFailedEvent;

/** The names of the events, as in the `event` field and the `X-Service-Event` header. */
export type WebhookEventType = WebhookEvent['event'];

type FieldKind = 'string' | 'number' | 'string|null' | 'number|null';

const BASE: Record<string, FieldKind> = {
  transaction_id: 'string',
  organization_id: 'string',
  api_key_id: 'string',
  external_user_ref: 'string|null',
  network: 'string',
};
const FINALIZED: Record<string, FieldKind> = {
  ...BASE,
  ats_id: 'number',
  tx_hash: 'string',
  block_number: 'number',
  block_hash: 'string',
  access_code: 'string|null',
  explorer_url: 'string',
  finalized_at: 'string',
};

/** @internal The fields each event must carry, with their JSON types. Fields added later are let through. */
export const EVENT_FIELDS: Readonly<Record<WebhookEventType, Readonly<Record<string, FieldKind>>>> = {
  work_registered: FINALIZED,
  work_updated: { ...FINALIZED, version: 'number' },
  work_failed: { ...BASE, ats_id: 'number|null', reason: 'string', message: 'string', failed_at: 'string' },
};

/**
 * @internal Why `body` is not an event of a known type with the fields that type requires, or undefined when it is.
 * `unknown` tells an event type this library does not know (a newer service) from a malformed body.
 */
export function eventProblem(body: unknown): { readonly unknown: boolean; readonly problem: string } | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { unknown: false, problem: 'the body is not a JSON object' };
  const record = body as Record<string, unknown>;
  const type = record.event;
  if (typeof type !== 'string') return { unknown: false, problem: 'the body has no string `event`' };
  if (!Object.hasOwn(EVENT_FIELDS, type)) return { unknown: true, problem: `unknown event type ${JSON.stringify(type)}` };
  for (const [field, kind] of Object.entries(EVENT_FIELDS[type as WebhookEventType])) {
    const value = record[field];
    const ok = (kind.endsWith('|null') && value === null) || typeof value === kind.replace('|null', '');
    if (!ok) return { unknown: false, problem: `${type}.${field} is not a ${kind}` };
  }
  if (record.network !== 'testnet' && record.network !== 'mainnet') return { unknown: false, problem: `${type}.network is not a network` };
  return undefined;
}
