/// <reference types="node" />
import { createHmac, timingSafeEqual } from 'node:crypto';
import { eventProblem, type WebhookEvent } from './webhook-events';

export type { WebhookEvent, WebhookEventType, WorkFailedEvent, WorkRegisteredEvent, WorkUpdatedEvent, Network } from './webhook-events';

/**
 * The request headers of a delivery, in any of the usual shapes: a Fetch `Headers` (or anything with a
 * `get(name)`), Node's `IncomingHttpHeaders`, or a plain record. Names are matched case-insensitively.
 */
export type WebhookHeaders = { get(name: string): string | null } | Readonly<Record<string, string | readonly string[] | undefined>>;

/** Options of {@link verifyWebhook}. */
export interface VerifyWebhookOptions {
  /**
   * How far, in seconds, the signed timestamp may be from `now`, either way (300 by default, as the contract
   * recommends). A replayed delivery older than this is refused even with a valid signature.
   */
  readonly toleranceSeconds?: number;
  /** The receiver's clock; the current time by default. */
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

/** The header carrying `t=<unix>,v1=<hex>` (contract §7). */
export const SIGNATURE_HEADER = 'x-service-signature';
const DEFAULT_TOLERANCE_SECONDS = 300;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Checks a webhook delivery and returns its event.
 *
 * The check is contract §7's: `v1` is the hex HMAC-SHA256, keyed with the base64-decoded `secret`, of
 * `<t>.<raw body>`, where `t` is the Unix time in the same header. Any of several `v1` values may match
 * (they are compared in constant time); then `t` must lie within `toleranceSeconds` of `now`. Only the
 * signed `t` counts: the `X-Service-Timestamp` header repeats it for logs and is not needed here.
 *
 * Pass the body exactly as received, before any JSON parsing: re-serialising a parsed body changes its bytes
 * and the signature no longer matches.
 *
 * @param rawBody the request body's bytes (a Buffer), or its text decoded as UTF-8
 * @param headers the request headers (see {@link WebhookHeaders})
 * @param secret the key's `webhook_secret` as the service returned it (standard base64)
 * @throws {@link WebhookVerificationError} when the delivery must be refused (answer it with a 400)
 * @throws TypeError when `secret` is not base64 or `rawBody` is not a string or bytes: a bug in the receiver,
 *   not a bad delivery
 */
export function verifyWebhook(
  rawBody: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): WebhookEvent {
  const key = secretBytes(secret);
  const body = bodyBytes(rawBody);
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (!(tolerance >= 0)) throw new TypeError('toleranceSeconds must be a number of seconds, 0 or more');

  const header = headerValue(headers, SIGNATURE_HEADER);
  if (header === undefined) throw new WebhookVerificationError('missing_header', 'the delivery has no X-Service-Signature header');
  const { timestamp, signatures } = parseSignatureHeader(header);

  const expected = createHmac('sha256', key).update(`${timestamp}.`).update(body).digest();
  // every candidate is compared, in constant time, so the time taken says nothing about which one came close
  let matched = false;
  for (const candidate of signatures) matched = timingSafeEqual(candidate, expected) || matched;
  if (!matched) throw new WebhookVerificationError('signature_mismatch', 'no v1 signature matches this body and secret');

  const now = (options.now ?? new Date()).getTime() / 1000;
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
function parseSignatureHeader(header: string): { timestamp: number; signatures: Buffer[] } {
  let timestamp: number | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    const name = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (name === 't') {
      if (timestamp !== undefined || !/^\d{1,15}$/.test(value)) throw malformed('t must appear once, as Unix seconds');
      timestamp = Number(value);
    } else if (name === 'v1') {
      if (!/^[0-9a-fA-F]{64}$/.test(value)) throw malformed('a v1 value is not 64 hex digits');
      signatures.push(Buffer.from(value, 'hex'));
    }
  }
  if (timestamp === undefined) throw malformed('no t=');
  if (signatures.length === 0) throw malformed('no v1=');
  return { timestamp, signatures };
}

const malformed = (detail: string) => new WebhookVerificationError('malformed_signature', `X-Service-Signature: ${detail}`);

function headerValue(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof headers.get === 'function') return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers as Readonly<Record<string, string | readonly string[] | undefined>>)) {
    if (key.toLowerCase() !== name || value === undefined) continue;
    // a header sent twice: Node joins most with ", ", a record may hold the list; the parts are one list here
    return typeof value === 'string' ? value : value.join(',');
  }
  return undefined;
}

function secretBytes(secret: string): Buffer {
  if (typeof secret !== 'string' || secret.length === 0 || !BASE64.test(secret)) {
    throw new TypeError('the webhook secret must be the standard base64 string the service returned with the key');
  }
  return Buffer.from(secret, 'base64');
}

function bodyBytes(rawBody: string | Uint8Array): Uint8Array {
  if (typeof rawBody === 'string') return Buffer.from(rawBody, 'utf8');
  if (rawBody instanceof Uint8Array) return rawBody;
  throw new TypeError('pass the raw request body (a Buffer or string), not a parsed object: parsing changes the signed bytes');
}
