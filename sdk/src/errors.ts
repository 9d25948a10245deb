import type { components } from './generated/openapi';

/** Every error code the API answers (docs/api.md#errors), from the served document. */
export type ErrorCode = components['schemas']['ErrorEnvelope']['error']['code'];

/** One invalid field of a `common.validation_failed` answer. */
export interface ErrorDetail {
  readonly path: string;
  readonly message: string;
}

/**
 * The codes of failures without an envelope: no response (`network.error`: a read, or a write that surely was not
 * sent; `network.outcome_unknown`: a write that was sent and never answered), a response that is not the envelope,
 * a refused upload.
 */
export type ClientErrorCode = 'network.error' | 'network.outcome_unknown' | 'response.invalid' | 'upload.failed';

/**
 * What every failed call throws: the API's error envelope (`code`, `message`, `request_id`, `details`) with the
 * HTTP status. A failure without an envelope has a `ClientErrorCode`: `network.error` (status 0, `cause` set),
 * `network.outcome_unknown` (status 0: a write went out and no answer came back, so it MAY HAVE TAKEN EFFECT),
 * `response.invalid` (an answer that is not the envelope) or `upload.failed` (storage refused the PUT).
 */
export class WorksApiError extends Error {
  override readonly name: string = 'WorksApiError';
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
  /**
   * Whether the last attempt's request may have reached the server: false only when the connection never opened.
   * True with status 0 (`network.outcome_unknown`) means a write may have taken effect without an answer.
   */
  readonly requestSent: boolean;
  /**
   * The `Idempotency-Key` the failed init write sent (`works.init`, `works.versions.init`, `.initUpload`, and the
   * init stage of `register`/`addVersion`): give it back as `{ idempotencyKey }` to retry the same logical write.
   */
  readonly idempotencyKey: string | undefined;

  constructor(init: {
    status: number;
    code: WorksApiError['code'];
    message: string;
    requestId?: string;
    details?: readonly ErrorDetail[];
    retryAfterMs?: number;
    attempts?: number;
    requestSent?: boolean;
    idempotencyKey?: string;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.details = init.details;
    this.retryAfterMs = init.retryAfterMs;
    this.attempts = init.attempts ?? 1;
    this.requestSent = init.requestSent ?? true;
    this.idempotencyKey = init.idempotencyKey;
  }
}

/** An IMF-fixdate, the HTTP-date senders generate (RFC 9110 §5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`. */
const IMF_FIXDATE =
  /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/**
 * `Retry-After` as milliseconds: delay-seconds (a non-negative integer) or an HTTP date (IMF-fixdate); undefined
 * when absent or anything else (`1.5`, `-1`, junk), so that junk never turns into a zero wait.
 */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  if (!IMF_FIXDATE.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The thrown error of an answered request: the envelope when the body is one, else `response.invalid`. */
export function errorFromResponse(response: Response, body: unknown, attempts: number, idempotencyKey?: string): WorksApiError {
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
      idempotencyKey,
    });
  }
  return new WorksApiError({
    status: response.status,
    code: 'response.invalid',
    message: `HTTP ${response.status} without the error envelope`,
    requestId,
    retryAfterMs: wait,
    attempts,
    idempotencyKey,
  });
}

/** The step of `works.register` / `works.addVersion` that failed. */
export type RegistrationStage = 'init' | 'upload' | 'prepare' | 'confirm';

/**
 * What `works.register` and `works.addVersion` throw: the failed step's `WorksApiError` (its fields copied, the
 * original as `cause`) with the `stage` it failed at, the `jobId` once init answered and the `quote` once prepare
 * did, so the flow can be resumed rather than started again (a second registration would be charged again):
 * - `init` (no `jobId`): retry `register` with `{ idempotencyKey: error.idempotencyKey }`, which answers the same job;
 * - `upload` / `prepare`: `works.upload(…)` / `works.prepare(jobId)` then `works.confirm(jobId)`;
 * - `confirm` with `network.outcome_unknown`: the confirm may have started the transaction. Do NOT simply confirm
 *   again blindly: a job already confirmed answers 404 `registration.prepared_not_found` (docs/api.md#registration-confirm), as does
 *   an expired quote, and that answer does not name the transaction. After such a 404, look for the outcome (the
 *   `work_registered` / `work_failed` webhook, matched by `external_user_ref`, or `works.list`) before
 *   registering again. A confirm that surely did nothing (`requestSent` false) may be sent again.
 */
export class RegistrationError<Q = unknown> extends WorksApiError {
  override readonly name: string = 'RegistrationError';
  /** The step that failed. */
  readonly stage: RegistrationStage;
  /** The job, once init answered: resume with it (`works.prepare(jobId)`, `works.confirm(jobId)`). */
  readonly jobId: string | undefined;
  /** The binding quote, once prepare answered. */
  readonly quote: Q | undefined;

  constructor(error: WorksApiError, progress: { stage: RegistrationStage; jobId?: string; quote?: Q }) {
    super({
      status: error.status,
      code: error.code,
      message: `${progress.stage}${progress.jobId ? ` of job ${progress.jobId}` : ''} failed: ${error.message}`,
      requestId: error.requestId,
      details: error.details,
      retryAfterMs: error.retryAfterMs,
      attempts: error.attempts,
      requestSent: error.requestSent,
      idempotencyKey: error.idempotencyKey,
      cause: error,
    });
    this.stage = progress.stage;
    this.jobId = progress.jobId;
    this.quote = progress.quote;
  }
}
