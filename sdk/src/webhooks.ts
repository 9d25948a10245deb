/// <reference types="node" />
import { createHmac, timingSafeEqual } from 'node:crypto';
import { eventProblem, type WebhookEvent } from './webhook-events';

export type { WebhookEvent, WebhookEventType, WorkFailedEvent, WorkRegisteredEvent, WorkUpdatedEvent, Network } from './webhook-events';

/**
 * The request headers of a delivery, in any of the usual shapes: a Fetch `Headers` (or anything else with a
 * `get(name)` that ignores case), a `Map`, Node's `IncomingHttpHeaders`, or a plain record. The names of a
 * `Map` or a record are matched case-insensitively here.
 */
export type WebhookHeaders =
  | { get(name: string): string | null }
  | ReadonlyMap<string, string | readonly string[] | undefined>
  | Readonly<Record<string, string | readonly string[] | undefined>>;

/** Options of {@link verifyWebhook}. */
export interface VerifyWebhookOptions {
  /**
   * How far, in seconds, the signed timestamp may be from `now`, either way (300 by default, as the contract
   * recommends). A replayed delivery older than this is refused even with a valid signature.
   */
  readonly toleranceSeconds?: number;
  /** The receiver's clock; the current time by default. An invalid `Date` is a `TypeError`, never a skipped check. */
  readonly now?: Date;
}

/** Why a delivery was refused. */
export type WebhookVerificationFailure =
  /** No `X-Service-Signature` header. */
  | 'missing_header'
  /** The signature header is not `t=<unix seconds>,v1=<64 hex>[,v1=…]`. */
  | 'malformed_signature'
  /** No `v1` value is the HMAC of this body with this secret: tampered, or signed with another key's secret. */
  | 'signature_mismatch'
  /** Correctly signed, but at a time further from `now` than the tolerance: a replay, or a wrong clock. */
  | 'timestamp_out_of_tolerance'
  /** Correctly signed, but not a JSON object carrying an event's required fields. */
  | 'malformed_body'
  /** Correctly signed, but an event type this library does not know (a newer service): acknowledge or upgrade. */
  | 'unknown_event';

/** Thrown by {@link verifyWebhook}: the delivery must not be trusted. `reason` says which check failed. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  constructor(
    readonly reason: WebhookVerificationFailure,
    message: string,
  ) {
    super(message);
  }
}

/** The header carrying `t=<unix>,v1=<hex>` (docs/api.md#headers-and-signature). */
export const SIGNATURE_HEADER = 'x-service-signature';
const DEFAULT_TOLERANCE_SECONDS = 300;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Checks a webhook delivery and returns its event.
 *
 * The check is that of docs/api.md#headers-and-signature: `v1` is the hex HMAC-SHA256, keyed with the base64-decoded `secret`, of
 * `<t>.<raw body>`, where `t` is the Unix time in the same header. Any of several `v1` values may match
 * (they are compared in constant time); then `t` must lie within `toleranceSeconds` of `now`. Only the
 * signed `t` counts: the `X-Service-Timestamp` header repeats it for logs and is not needed here.
 *
 * Pass the body exactly as received, before any JSON parsing: re-serialising a parsed body changes its bytes
 * and the signature no longer matches.
 *
 * The tolerance limits replays, it does not stop them: a captured delivery verifies again within it. Store
 * each event once, keyed by its `transaction_id` (signed, in the body); the `X-Service-Delivery` header names
 * the delivery for your logs but is not signed.
 *
 * @param rawBody the request body exactly as received: its bytes (a `Buffer`/`Uint8Array`, the `ArrayBuffer` of
 *   `request.arrayBuffer()`, or any view of one), or its text, encoded here as UTF-8
 * @param headers the request headers (see {@link WebhookHeaders})
 * @param secret the key's `webhook_secret` as the service returned it (standard base64; surrounding white
 *   space, such as a file's final newline, is ignored)
 * @throws {@link WebhookVerificationError} when the delivery must be refused (answer it with a 400)
 * @throws TypeError when `secret` is not base64, `rawBody` is not a string or bytes, or `now` or
 *   `toleranceSeconds` is not a valid time: a bug in the receiver, not a bad delivery
 */
export function verifyWebhook(
  rawBody: string | ArrayBuffer | ArrayBufferView,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): WebhookEvent {
  const key = secretBytes(secret);
  const body = bodyBytes(rawBody);
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (!(Number.isFinite(tolerance) && tolerance >= 0))
    throw new TypeError('toleranceSeconds must be a finite number of seconds, 0 or more');
  const nowMs = options.now === undefined ? Date.now() : options.now instanceof Date ? options.now.getTime() : Number.NaN;
  // an Invalid Date would make every comparison false and skip the time check: refuse it instead
  if (!Number.isFinite(nowMs)) throw new TypeError('now must be a valid Date');

  const header = headerValue(headers, SIGNATURE_HEADER);
  if (header === undefined) throw new WebhookVerificationError('missing_header', 'the delivery has no X-Service-Signature header');
  const { timestamp, timestampText, signatures } = parseSignatureHeader(header);

  // over `t` as received (docs/api.md#headers-and-signature: `<t>.<raw body>`), not as re-printed from its number
  const expected = createHmac('sha256', key).update(`${timestampText}.`).update(body).digest();
  // every candidate is compared, in constant time, so the time taken says nothing about which one came close
  let matched = false;
  for (const candidate of signatures) matched = timingSafeEqual(candidate, expected) || matched;
  if (!matched) throw new WebhookVerificationError('signature_mismatch', 'no v1 signature matches this body and secret');

  const now = nowMs / 1000;
  if (Math.abs(now - timestamp) > tolerance) {
    throw new WebhookVerificationError(
      'timestamp_out_of_tolerance',
      `signed at ${timestamp}, ${Math.round(now - timestamp)} s from this receiver's clock (tolerance ${tolerance} s)`,
    );
  }

  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    throw new WebhookVerificationError('malformed_body', 'the body is not JSON');
  }
  const problem = eventProblem(parsed);
  if (problem) throw new WebhookVerificationError(problem.unknown ? 'unknown_event' : 'malformed_body', problem.problem);
  return parsed as WebhookEvent;
}

/** `t=<unix>,v1=<hex>[,v1=<hex>…]`; other schemes (`v0`, a future `v2`) are ignored. */
function parseSignatureHeader(header: string): { timestamp: number; timestampText: string; signatures: Buffer[] } {
  let timestampText: string | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    const name = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (name === 't') {
      if (timestampText !== undefined || !/^\d{1,15}$/.test(value)) throw malformed('t must appear once, as Unix seconds');
      timestampText = value;
    } else if (name === 'v1') {
      if (!/^[0-9a-fA-F]{64}$/.test(value)) throw malformed('a v1 value is not 64 hex digits');
      signatures.push(Buffer.from(value, 'hex'));
    }
  }
  if (timestampText === undefined) throw malformed('no t=');
  if (signatures.length === 0) throw malformed('no v1=');
  return { timestamp: Number(timestampText), timestampText, signatures };
}

const malformed = (detail: string) => new WebhookVerificationError('malformed_signature', `X-Service-Signature: ${detail}`);

function headerValue(headers: WebhookHeaders, name: string): string | undefined {
  // a Map's get is case-sensitive: its entries are searched like a record's
  const entries =
    headers instanceof Map
      ? [...(headers as ReadonlyMap<string, string | readonly string[] | undefined>).entries()]
      : typeof headers.get === 'function'
        ? undefined
        : Object.entries(headers as Readonly<Record<string, string | readonly string[] | undefined>>);
  if (entries === undefined) return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  for (const [key, value] of entries) {
    if (key.toLowerCase() !== name || value === undefined) continue;
    // a header sent twice: Node joins most with ", ", a record may hold the list; the parts are one list here
    return typeof value === 'string' ? value : value.join(',');
  }
  return undefined;
}

function secretBytes(secret: string): Buffer {
  // a secret read from a file or an environment file often ends with a newline
  const trimmed = typeof secret === 'string' ? secret.trim() : '';
  if (trimmed.length === 0 || !BASE64.test(trimmed)) {
    throw new TypeError('the webhook secret must be the standard base64 string the service returned with the key');
  }
  return Buffer.from(trimmed, 'base64');
}

function bodyBytes(rawBody: string | ArrayBuffer | ArrayBufferView): Uint8Array {
  if (typeof rawBody === 'string') return Buffer.from(rawBody, 'utf8');
  if (rawBody instanceof Uint8Array) return rawBody;
  if (ArrayBuffer.isView(rawBody)) return new Uint8Array(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  if (rawBody instanceof ArrayBuffer || Object.prototype.toString.call(rawBody) === '[object ArrayBuffer]') {
    return new Uint8Array(rawBody as ArrayBuffer);
  }
  throw new TypeError('pass the raw request body (bytes or a string), not a parsed object: parsing changes the signed bytes');
}
