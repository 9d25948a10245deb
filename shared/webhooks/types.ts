/* The rows of the webhook tables as repo.ts (their one SQL owner) hands them out. */

/** A delivery as its job sees it, with everything its attempt needs (the body's parts and the sealed secret). */
export interface Delivery {
  readonly id: string;
  readonly status: 'pending' | 'delivered' | 'dead';
  readonly url: string;
  readonly currentJobId: string | null;
  readonly eventId: string;
  readonly event: string;
  readonly transactionId: string;
  readonly organizationId: string;
  readonly apiKeyId: string;
  readonly payload: Record<string, unknown>;
  readonly sealedAccessCode: string | null;
  readonly sealedWebhookSecret: string;
  /** The trace of the transaction the event tells of (telemetry/tracing.ts), kept on the event; null if untraced. */
  readonly traceparent: string | null;
  /** When its transaction was confirmed (for the confirm → webhook latency); null for an event older than that record. */
  readonly confirmedAt: Date | null;
}

/** An attempt's row and the delivery's new state, written together. */
export interface AttemptRecord {
  readonly delivery: Delivery;
  /** The delivery's status after this attempt. */
  readonly status: 'pending' | 'delivered' | 'dead';
  readonly outcome: 'delivered' | 'retry' | 'dead';
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly durationMs: number;
  readonly nextAttemptAt: Date | null;
}

export interface EventRow {
  readonly id: string;
  readonly transactionId: string;
  readonly organizationId: string;
  readonly apiKeyId: string;
  readonly type: string;
  readonly payload: Record<string, unknown>;
  /** Kept on the event's delivery (webhook_deliveries), until delivered or dead; not at all without a delivery. */
  readonly sealedAccessCode: string | null;
  readonly traceparent: string | null;
  readonly confirmedAt: Date;
}

export interface DeadDeliveryRow {
  readonly id: string;
  readonly event: string;
  readonly transaction_id: string;
  readonly url: string;
  readonly attempts: number;
  readonly last_status_code: number | null;
  readonly last_error: string | null;
  readonly updated_at: Date;
}

/** Dead deliveries with their event, newest first; one when `id` is given. */
/* As support staff read them (repo.ts's eventHistory, the CLI's `transaction show`). */

/** An event a transaction produced, with its delivery when the key had a webhook URL (else the delivery's fields are null). */
export interface EventDeliveryRow {
  readonly id: string;
  readonly type: string;
  readonly payload: Record<string, unknown>;
  readonly created_at: Date;
  readonly delivery_id: string | null;
  readonly url: string | null;
  readonly status: 'pending' | 'delivered' | 'dead' | null;
  readonly attempts: number | null;
  readonly next_attempt_at: Date | null;
  readonly delivered_at: Date | null;
}

/** One attempt at a delivery: when, how it went, and when the next one is due (none after the last). */
export interface AttemptRow {
  readonly delivery_id: string;
  readonly attempt: number;
  readonly created_at: Date;
  readonly status_code: number | null;
  readonly duration_ms: number;
  readonly error: string | null;
  readonly outcome: 'delivered' | 'retry' | 'dead';
  readonly next_attempt_at: Date | null;
}
