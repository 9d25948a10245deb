import type { components } from './generated/openapi';

/** Every error code the API answers (contract §1), from the served document. */
export type ErrorCode = components['schemas']['ErrorEnvelope']['error']['code'];

/** One invalid field of a `common.validation_failed` answer. */
export interface ErrorDetail {
  readonly path: string;
  readonly message: string;
}

/** The codes of failures without an envelope: no response, a response that is not the envelope, a refused upload. */
export type ClientErrorCode = 'network.error' | 'response.invalid' | 'upload.failed';

/**
 * What every failed call throws: the API's error envelope (`code`, `message`, `request_id`, `details`) with the
 * HTTP status. A failure without an envelope has a `ClientErrorCode`: `network.error` (status 0, `cause` set),
 * `response.invalid` (an answer that is not the envelope) or `upload.failed` (storage refused the PUT).
 */
export class WorksApiError extends Error {
  override readonly name = 'WorksApiError';
  /** The HTTP status; 0 when no response arrived. */
  readonly status: number;
  /** The envelope's code, or a `ClientErrorCode` when there is no envelope. */
  readonly code: ErrorCode | ClientErrorCode;
  /** The envelope's `request_id` (also the `X-Request-Id` header): quote it to support. */
  readonly requestId: string | undefined;
  /** `{ path, message }` of each invalid field, for `common.validation_failed`. */
  readonly details: readonly ErrorDetail[] | undefined;
  /** `Retry-After` of a 429 or 503, in milliseconds. */
  readonly retryAfterMs: number | undefined;
  /** How many attempts were made before giving up (retries included). */
  readonly attempts: number;

  constructor(init: {
    status: number;
    code: WorksApiError['code'];
    message: string;
    requestId?: string;
    details?: readonly ErrorDetail[];
    retryAfterMs?: number;
    attempts?: number;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.details = init.details;
    this.retryAfterMs = init.retryAfterMs;
    this.attempts = init.attempts ?? 1;
  }
}

/** `Retry-After` as milliseconds: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The thrown error of an answered request: the envelope when the body is one, else `response.invalid`. */
export function errorFromResponse(response: Response, body: unknown, attempts: number): WorksApiError {
  const envelope = (body as { error?: { code?: unknown; message?: unknown; request_id?: unknown; details?: unknown } } | null)?.error;
  const requestId = response.headers.get('x-request-id') ?? undefined;
  const wait = retryAfterMs(response.headers.get('retry-after'));
  if (envelope && typeof envelope.code === 'string' && typeof envelope.message === 'string') {
    return new WorksApiError({
      status: response.status,
      code: envelope.code as ErrorCode,
      message: envelope.message,
      requestId: typeof envelope.request_id === 'string' ? envelope.request_id : requestId,
      details: Array.isArray(envelope.details) ? (envelope.details as ErrorDetail[]) : undefined,
      retryAfterMs: wait,
      attempts,
    });
  }
  return new WorksApiError({
    status: response.status,
    code: 'response.invalid',
    message: `HTTP ${response.status} without the error envelope`,
    requestId,
    retryAfterMs: wait,
    attempts,
  });
}
