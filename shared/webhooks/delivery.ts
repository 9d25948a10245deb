import http from 'node:http';
import https from 'node:https';
import type { Knex } from 'knex';
import type { AppContext } from '../context';
import { webhookSecretAad } from '../api-keys/service';
import { accessCodeAad } from './service';
import { signWebhook } from './signature';
import { pinnedLookup, RefusedDestination, vetDestination, type VettedDestination } from './destination';
import { parseRetryAfter, retryDelaySeconds } from './retry-delay';

/** A delivery as its job sees it. */
export interface Delivery {
  readonly id: string;
  readonly status: 'pending' | 'delivered' | 'dead';
  readonly url: string;
  readonly currentJobId: string | null;
  readonly eventId: string;
  readonly event: string;
  readonly transactionId: string;
  readonly apiKeyId: string;
}

/** How one HTTP attempt went (contract §7 classification). */
type Result =
  | { readonly kind: 'delivered'; readonly statusCode: number }
  | { readonly kind: 'retry'; readonly statusCode?: number; readonly error?: string; readonly retryAfterSeconds?: number }
  | { readonly kind: 'permanent'; readonly statusCode?: number; readonly error?: string };

/** What follows an attempt. */
type Verdict =
  | { readonly kind: 'delivered'; readonly statusCode: number }
  | { readonly kind: 'retry'; readonly delayMs: number; readonly reason: string }
  | { readonly kind: 'dead'; readonly reason: string };

/** The verdict on an attempt, and that attempt's number within the delivery. */
export type Decision = Verdict & { readonly attempt: number };

export interface AttemptPlan {
  /** Which retry of the schedule this attempt would lead to (0 for the first retry). */
  readonly retryIndex: number;
  /** No run of the job is left after this one. */
  readonly final: boolean;
}

const MAX_RESPONSE_BYTES = 64 * 1024;

export async function loadDelivery(db: Knex, deliveryId: string): Promise<Delivery | undefined> {
  const row = await db('webhook_deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .where('d.id', deliveryId)
    .first('d.id', 'd.status', 'd.url', 'd.current_job_id', 'd.api_key_id', 'e.id as event_id', 'e.type', 'e.transaction_id');
  if (!row) return undefined;
  return {
    id: row.id,
    status: row.status,
    url: row.url,
    currentJobId: row.current_job_id,
    eventId: row.event_id,
    event: row.type,
    transactionId: row.transaction_id,
    apiKeyId: row.api_key_id,
  };
}

/**
 * One delivery attempt (contract §7): the URL vetted at this moment (scheme, and SSRF after DNS resolution),
 * the stored payload (the access code unsealed just for the body), signed afresh, POSTed to the vetted
 * address within the timeout without following redirects; then the attempt recorded with what follows it.
 */
export async function attemptDelivery(app: AppContext, delivery: Delivery, plan: AttemptPlan): Promise<Decision> {
  const { webhooks } = app.config;
  const started = Date.now();
  const vetted = await withDeadline(vetDestination(delivery.url, webhooks), webhooks.timeoutMs, 'resolving the webhook host').then(
    (destination) => ({ destination }),
    (err: Error) => ({ refusal: err }),
  );
  // A failure to load or sign is ours, not the receiver's: it throws (the job retries) and is no attempt.
  const result: Result =
    'refusal' in vetted
      ? { kind: vetted.refusal instanceof RefusedDestination ? 'permanent' : 'retry', error: vetted.refusal.message }
      : await post(vetted.destination, await signedRequest(app, delivery), { deadline: started + webhooks.timeoutMs, timeoutMs: webhooks.timeoutMs });
  const decision = decide(result, plan, webhooks.retrySchedule);
  const nextAttemptAt = decision.kind === 'retry' ? new Date(Date.now() + decision.delayMs) : null;
  const error = 'error' in result ? (result.error ?? null) : null;
  // The delivery's new state and the attempt's row in one statement (atomic without a transaction's extra round trips).
  const { rows } = await app.db.raw(
    `WITH d AS (
       UPDATE webhook_deliveries
       SET attempts = attempts + 1, status = :status, last_status_code = CAST(:statusCode AS integer), last_error = :error,
           next_attempt_at = CAST(:nextAttemptAt AS timestamptz), delivered_at = CASE WHEN CAST(:delivered AS boolean) THEN now() END, updated_at = now()
       WHERE id = :deliveryId
       RETURNING attempts
     )
     INSERT INTO webhook_attempts (delivery_id, event_id, event, transaction_id, api_key_id, url, attempt, status_code, duration_ms, error, outcome, next_attempt_at)
     SELECT CAST(:deliveryId AS uuid), CAST(:eventId AS uuid), CAST(:event AS text), CAST(:transactionId AS uuid), CAST(:apiKeyId AS uuid),
       CAST(:url AS text), d.attempts, CAST(:statusCode AS integer), CAST(:durationMs AS integer), CAST(:error AS text), CAST(:outcome AS text),
       CAST(:nextAttemptAt AS timestamptz)
     FROM d
     RETURNING attempt`,
    {
      deliveryId: delivery.id,
      status: decision.kind === 'retry' ? 'pending' : decision.kind,
      statusCode: result.statusCode ?? null,
      error,
      nextAttemptAt,
      delivered: decision.kind === 'delivered',
      eventId: delivery.eventId,
      event: delivery.event,
      transactionId: delivery.transactionId,
      apiKeyId: delivery.apiKeyId,
      url: delivery.url,
      durationMs: Date.now() - started,
      outcome: decision.kind,
    },
  );
  if (!rows[0]) throw new Error(`delivery ${delivery.id} no longer exists`);
  const attempt = rows[0].attempt as number;
  return { ...decision, attempt };
}

async function signedRequest(app: AppContext, delivery: Delivery): Promise<{ body: string; headers: Record<string, string> }> {
  const event = await app.db('events as e')
    .join('api_keys as k', 'k.id', 'e.api_key_id')
    .where('e.id', delivery.eventId)
    .first('e.payload', 'e.sealed_access_code', 'k.webhook_secret_encrypted');
  const payload = { ...event.payload };
  if (event.sealed_access_code) payload.access_code = app.box.open(event.sealed_access_code, accessCodeAad(delivery.eventId)).toString();
  const body = JSON.stringify(payload);
  const timestamp = Math.floor(Date.now() / 1000);
  const secret = app.box.open(event.webhook_secret_encrypted, webhookSecretAad(delivery.apiKeyId));
  const signature = signWebhook(secret, body, timestamp);
  secret.fill(0);
  return {
    body,
    headers: {
      'Content-Type': 'application/json',
      'User-Agent': 'works-api-webhooks/1',
      'X-Service-Signature': signature,
      'X-Service-Timestamp': String(timestamp),
      'X-Service-Event': delivery.event,
      'X-Service-Delivery': delivery.id,
    },
  };
}

function decide(result: Result, plan: AttemptPlan, schedule: readonly number[]): Verdict {
  if (result.kind === 'delivered') return { kind: 'delivered', statusCode: result.statusCode };
  const reason = [result.statusCode ? `HTTP ${result.statusCode}` : undefined, result.error].filter(Boolean).join(': ');
  if (result.kind === 'permanent') return { kind: 'dead', reason };
  if (plan.final) return { kind: 'dead', reason: `${reason} (retry schedule exhausted)` };
  return { kind: 'retry', delayMs: retryDelaySeconds(schedule, plan.retryIndex, result.retryAfterSeconds) * 1000, reason };
}

/** POSTs once over a fresh connection to the vetted address; the whole exchange ends by `deadline`. */
function post(
  destination: VettedDestination,
  request: { body: string; headers: Record<string, string> },
  { deadline, timeoutMs }: { deadline: number; timeoutMs: number },
): Promise<Result> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: Result) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const client = destination.url.protocol === 'https:' ? https : http;
    const outgoing = client.request(
      destination.url,
      {
        method: 'POST',
        headers: { ...request.headers, 'Content-Length': Buffer.byteLength(request.body) },
        lookup: pinnedLookup(destination.addresses),
        agent: false,
      },
      (response) => {
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_RESPONSE_BYTES) response.destroy();
        });
        response.on('close', () => finish(classify(response.statusCode ?? 0, response.headers['retry-after'])));
        response.on('error', () => undefined);
      },
    );
    const timer = setTimeout(() => outgoing.destroy(new Error(`no response within ${timeoutMs} ms`)), Math.max(1, deadline - Date.now()));
    outgoing.on('error', (err) => finish({ kind: 'retry', error: err.message }));
    outgoing.end(request.body);
  });
}

function classify(status: number, retryAfter: string | string[] | undefined): Result {
  if (status >= 200 && status < 300) return { kind: 'delivered', statusCode: status };
  if (status === 408 || status === 429 || status >= 500) return { kind: 'retry', statusCode: status, retryAfterSeconds: parseRetryAfter(retryAfter) };
  return { kind: 'permanent', statusCode: status, error: status >= 300 && status < 400 ? 'redirects are not followed' : undefined };
}

function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms)));
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}
