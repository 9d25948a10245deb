import http from 'node:http';
import https from 'node:https';
import type { Config } from '../config';
import type { EventMetrics } from '../metrics/events';
import type { SecretBox } from '../crypto/secret-box';
import { webhookSecretAad } from '../api-keys/service';
import { accessCodeAad } from './service';
import { signWebhook } from './signature';
import { pinnedLookup, RefusedDestination, resolveAll, vetDestination, type Resolver, type VettedDestination } from './destination';
import type { DeliveryConnections } from './connections';
import type { Delivery, DeliveryRepo } from './repo';
import { parseRetryAfter, retryDelaySeconds } from './retry-policy';
import { withTimeout } from '../timeout';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import { ATTR, contextFor, inSpan } from '../telemetry/tracing';

/** How one HTTP attempt went (docs/api.md#delivery-and-retries classification). */
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

/** The process's handles an attempt uses. */
export interface DeliveryDeps {
  readonly box: SecretBox;
  readonly config: Pick<Config, 'webhooks'>;
  readonly metrics: EventMetrics;
}

/** What an attempt uses besides those: the process's batched statements and kept-alive connections. */
export interface AttemptDeps {
  readonly repo: DeliveryRepo;
  readonly connections: DeliveryConnections;
  /** Resolves the webhook host at each attempt: the system resolver unless given one (a worker's keeps answers a while: resolved-hosts.ts). */
  readonly resolve?: Resolver;
  /** The webhook secrets of the job's run (a batch's deliveries share their key's); else the attempt's own. */
  readonly secrets?: RunSecrets;
}

/**
 * Webhook secrets opened for one job's run, each once: a batch's deliveries, all to one key's URL, share one
 * AES-GCM open rather than one each. Kept by key and ciphertext together, so a secret sealed for another key
 * never signs for this one (its associated data would not have opened it), and zeroed by `wipe` when the run
 * ends; never kept from one run to the next: once wiped, it signs nothing more (a late attempt throws, rather than
 * open a secret nobody would wipe).
 */
export class RunSecrets {
  private readonly opened = new Map<string, Buffer>();
  private wiped = false;

  constructor(private readonly box: SecretBox) {}

  sign(delivery: Delivery, body: string, timestamp: number): string {
    if (this.wiped) throw new Error("the job run's webhook secrets were wiped: its attempts are over");
    const id = `${delivery.apiKeyId} ${delivery.sealedWebhookSecret}`;
    let secret = this.opened.get(id);
    if (!secret) this.opened.set(id, (secret = this.box.open(delivery.sealedWebhookSecret, webhookSecretAad(delivery.apiKeyId))));
    return signWebhook(secret, body, timestamp);
  }

  wipe(): void {
    this.wiped = true;
    for (const secret of this.opened.values()) secret.fill(0);
    this.opened.clear();
  }
}

/** Runs `use` with the run's secrets, or with secrets of its own that are wiped when it ends. */
export async function withRunSecrets<T>(
  box: SecretBox,
  given: RunSecrets | undefined,
  use: (secrets: RunSecrets) => Promise<T>,
): Promise<T> {
  if (given) return use(given);
  const secrets = new RunSecrets(box);
  try {
    return await use(secrets);
  } finally {
    secrets.wipe();
  }
}

const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * One delivery attempt (docs/api.md#delivery-and-retries): the URL vetted at this moment (scheme, and SSRF after DNS resolution),
 * the stored payload (the access code unsealed just for the body), signed afresh, POSTed to the vetted
 * address within the timeout without following redirects; then the attempt recorded with what follows it.
 */
export function attemptDelivery(app: DeliveryDeps, delivery: Delivery, plan: AttemptPlan, using: AttemptDeps): Promise<Decision> {
  // in the trace of the transaction the event tells of: under the job's run when that run is in it (a delivery
  // job of its own), else (a batch job's, a revived dead letter's) under the confirm, linked to the run
  const run = trace.getActiveSpan()?.spanContext();
  const parent = contextFor(delivery.traceparent);
  const attributes = {
    [ATTR.organization]: String(delivery.payload.organization_id ?? ''),
    [ATTR.transaction]: delivery.transactionId,
    [ATTR.delivery]: delivery.id,
    [ATTR.event]: delivery.event,
  };
  const options = parent === context.active() ? { attributes } : { attributes, parent, links: run ? [{ context: run }] : [] };
  return inSpan('webhook.attempt', options, async (span) => {
    const decision = await withRunSecrets(app.box, using.secrets, (secrets) => attempt(app, delivery, plan, using, secrets));
    span.setAttributes({ [ATTR.attempt]: decision.attempt, [ATTR.outcome]: decision.kind });
    if (decision.kind !== 'delivered') span.setStatus({ code: SpanStatusCode.ERROR, message: decision.reason });
    return decision;
  });
}

async function attempt(
  app: DeliveryDeps,
  delivery: Delivery,
  plan: AttemptPlan,
  using: AttemptDeps,
  secrets: RunSecrets,
): Promise<Decision> {
  const { webhooks } = app.config;
  const started = Date.now();
  // the deadline (and its timer) only where there is a wait: a host name to resolve, not an address
  const resolve: Resolver = (host) =>
    withTimeout((using.resolve ?? resolveAll)(host), webhooks.timeoutMs, `resolving the webhook host took over ${webhooks.timeoutMs} ms`);
  const vetted = await vetDestination(delivery.url, webhooks, resolve).then(
    (destination) => ({ destination }),
    (err: Error) => ({ refusal: err }),
  );
  // A failure to sign is ours, not the receiver's: it throws (the job retries) and is no attempt.
  const queuedAt = Date.now();
  let queuedMs = 0; // a wait for a free slot is ours, not the receiver's: not in the attempt's duration
  const result: Result =
    'refusal' in vetted
      ? { kind: vetted.refusal instanceof RefusedDestination ? 'permanent' : 'retry', error: vetted.refusal.message }
      : await using.connections.withSlot(() => {
          queuedMs = Date.now() - queuedAt;
          return post(vetted.destination, signedRequest(app, delivery, secrets), {
            // from the moment it may send: a wait for a free slot does not eat into the receiver's time
            deadline: Date.now() + webhooks.timeoutMs,
            timeoutMs: webhooks.timeoutMs,
            agent: using.connections.agentFor(vetted.destination),
          });
        });
  const decision = decide(result, plan, webhooks.retrySchedule);
  const attempt = await using.repo.record({
    delivery,
    status: decision.kind === 'retry' ? 'pending' : decision.kind,
    outcome: decision.kind,
    statusCode: result.statusCode ?? null,
    error: 'error' in result ? (result.error ?? null) : null,
    durationMs: Date.now() - started - queuedMs,
    nextAttemptAt: decision.kind === 'retry' ? new Date(Date.now() + decision.delayMs) : null,
  });
  app.metrics.attempted(decision.kind, delivery);
  return { ...decision, attempt };
}

interface SignedRequest {
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
}

function signedRequest(app: DeliveryDeps, delivery: Delivery, secrets: RunSecrets): SignedRequest {
  const payload = { ...delivery.payload };
  if (delivery.sealedAccessCode) payload.access_code = app.box.open(delivery.sealedAccessCode, accessCodeAad(delivery.eventId)).toString();
  const body = JSON.stringify(payload);
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = secrets.sign(delivery, body, timestamp);
  return {
    body,
    // an object, not Node's flat list: OpenTelemetry's HTTP instrumentation copies the headers as an object to add
    // its traceparent, which turned a list's names and values into headers named 0, 1, 2… (tracing.test.ts)
    headers: {
      'Content-Type': 'application/json',
      'Content-Length': String(Buffer.byteLength(body)),
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

/** Errors of a kept-alive connection the receiver closed while idle, before our request reached it. */
const STALE_CONNECTION = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/**
 * POSTs once to the vetted address, over a kept-alive connection when `agent` has one, and the whole exchange
 * ends by `deadline`. A reused connection that fails before any answer was closed by the receiver while idle
 * (a race every keep-alive client meets): the request goes again at once over a fresh connection, within the
 * same deadline and as the same attempt, as a fresh connection per delivery would have sent it in the first place.
 */
async function post(
  destination: VettedDestination,
  request: SignedRequest,
  options: { deadline: number; timeoutMs: number; agent: http.Agent | false },
): Promise<Result> {
  const first = await exchange(destination, request, options);
  if (!first.staleConnection) return first.result;
  return (await exchange(destination, request, { ...options, agent: false })).result;
}

function exchange(
  destination: VettedDestination,
  request: SignedRequest,
  { deadline, timeoutMs, agent }: { deadline: number; timeoutMs: number; agent: http.Agent | false },
): Promise<{ result: Result; staleConnection?: boolean }> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: Result, staleConnection = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ result, staleConnection });
    };
    const client = destination.url.protocol === 'https:' ? https : http;
    let answered = false;
    const outgoing = client.request(
      destination.url,
      { method: 'POST', headers: request.headers, lookup: pinnedLookup(destination.addresses), agent },
      (response) => {
        answered = true;
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
    outgoing.on('error', (err: NodeJS.ErrnoException) => {
      const stale = outgoing.reusedSocket && !answered && STALE_CONNECTION.has(err.code ?? '') && Date.now() < deadline;
      finish({ kind: 'retry', error: err.message }, stale);
    });
    outgoing.end(request.body);
  });
}

function classify(status: number, retryAfter: string | string[] | undefined): Result {
  if (status >= 200 && status < 300) return { kind: 'delivered', statusCode: status };
  if (status === 408 || status === 429 || status >= 500)
    return { kind: 'retry', statusCode: status, retryAfterSeconds: parseRetryAfter(retryAfter) };
  return { kind: 'permanent', statusCode: status, error: status >= 300 && status < 400 ? 'redirects are not followed' : undefined };
}
