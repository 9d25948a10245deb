import http from 'node:http';
import https from 'node:https';
import type { AppContext } from '../context';
import { webhookSecretAad } from '../api-keys/service';
import { accessCodeAad } from './service';
import { signWebhook } from './signature';

export type AttemptOutcome =
  | { readonly kind: 'delivered'; readonly statusCode: number }
  | { readonly kind: 'retry'; readonly statusCode?: number; readonly error?: string; readonly retryAfterSeconds?: number }
  | { readonly kind: 'permanent'; readonly statusCode?: number; readonly error?: string };

const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * One delivery attempt (contract §7): the stored payload (with the access code unsealed just for the body),
 * signed afresh, POSTed with a timeout and without following redirects, and recorded as an attempt.
 */
export async function attemptDelivery(app: AppContext, deliveryId: string): Promise<AttemptOutcome> {
  const delivery = await app.db('webhook_deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .join('api_keys as k', 'k.id', 'd.api_key_id')
    .where('d.id', deliveryId)
    .first('d.id', 'd.url', 'd.status', 'd.attempts', 'e.id as event_id', 'e.type', 'e.payload', 'e.sealed_access_code', 'k.id as api_key_id', 'k.webhook_secret_encrypted');
  if (!delivery || delivery.status === 'delivered') return { kind: 'delivered', statusCode: 0 };

  const payload = { ...delivery.payload };
  if (delivery.sealed_access_code) payload.access_code = app.box.open(delivery.sealed_access_code, accessCodeAad(delivery.event_id)).toString();
  const body = JSON.stringify(payload);
  const timestamp = Math.floor(Date.now() / 1000);
  const secret = app.box.open(delivery.webhook_secret_encrypted, webhookSecretAad(delivery.api_key_id));
  const signature = signWebhook(secret, body, timestamp);
  secret.fill(0);

  const started = Date.now();
  const outcome = await post(delivery.url, body, {
    'Content-Type': 'application/json',
    'User-Agent': 'works-api-webhooks/1',
    'X-Service-Signature': signature,
    'X-Service-Timestamp': String(timestamp),
    'X-Service-Event': delivery.type,
    'X-Service-Delivery': delivery.id,
  }, app.config.webhooks.timeoutMs);
  const attempt = delivery.attempts + 1;
  await app.db.transaction(async (trx) => {
    await trx('webhook_attempts').insert({
      delivery_id: delivery.id,
      attempt,
      status_code: outcome.statusCode ?? null,
      duration_ms: Date.now() - started,
      error: 'error' in outcome ? outcome.error ?? null : null,
    });
    await trx('webhook_deliveries').where({ id: delivery.id }).update({
      attempts: attempt,
      last_status_code: outcome.statusCode ?? null,
      last_error: 'error' in outcome ? outcome.error ?? null : null,
      status: outcome.kind === 'delivered' ? 'delivered' : 'pending',
      delivered_at: outcome.kind === 'delivered' ? trx.fn.now() : null,
      updated_at: trx.fn.now(),
    });
  });
  return outcome;
}

export async function markDead(app: AppContext, deliveryId: string): Promise<void> {
  await app.db('webhook_deliveries').where({ id: deliveryId }).whereNot({ status: 'delivered' }).update({ status: 'dead', updated_at: app.db.fn.now() });
}

function post(url: string, body: string, headers: Record<string, string>, timeoutMs: number): Promise<AttemptOutcome> {
  return new Promise((resolve) => {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return resolve({ kind: 'permanent', error: 'invalid webhook URL' });
    }
    const client = target.protocol === 'https:' ? https : http;
    const request = client.request(target, { method: 'POST', headers: { ...headers, 'Content-Length': Buffer.byteLength(body) }, timeout: timeoutMs }, (response) => {
      let read = 0;
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > MAX_RESPONSE_BYTES) response.destroy();
      });
      response.on('close', () => resolve(classify(response.statusCode ?? 0, response.headers['retry-after'])));
      response.on('error', () => undefined);
    });
    request.on('timeout', () => request.destroy(new Error(`no response within ${timeoutMs} ms`)));
    request.on('error', (err) => resolve({ kind: 'retry', error: err.message }));
    request.end(body);
  });
}

function classify(status: number, retryAfter: string | string[] | undefined): AttemptOutcome {
  if (status >= 200 && status < 300) return { kind: 'delivered', statusCode: status };
  if (status === 408 || status === 429 || status >= 500) {
    const seconds = typeof retryAfter === 'string' && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined;
    return { kind: 'retry', statusCode: status, retryAfterSeconds: seconds };
  }
  return { kind: 'permanent', statusCode: status, error: status >= 300 && status < 400 ? 'redirects are not followed' : undefined };
}
