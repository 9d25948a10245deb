/* Rows of the webhook tables as support staff read them (repo.ts's eventHistory, the CLI's `transaction show`). */

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
