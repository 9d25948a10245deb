/**
 * One error type for everything a client may be told. `code` is stable (docs/api.md#errors); the HTTP status
 * follows from it. Domain services throw these; the web's error middleware maps them to the envelope.
 */
export const ERROR_STATUS = {
  'common.bad_request': 400,
  'auth.unauthorized': 401,
  'auth.insufficient_scope': 403,
  'organization.inactive': 403,
  'common.forbidden': 403,
  'common.not_found': 404,
  'common.method_not_allowed': 405,
  'common.conflict': 409,
  'common.payload_too_large': 413,
  'common.headers_too_large': 431,
  'common.unsupported_media_type': 415,
  'common.validation_failed': 422,
  'registration.upload_session_not_found': 404,
  'registration.prepared_not_found': 404,
  'registration.audio_missing': 422,
  'registration.audio_empty': 422,
  'registration.audio_too_large': 413,
  'registration.dry_run_failed': 422,
  'registration.quote_invalid': 422,
  'credits.insufficient': 422,
  'idempotency.key_in_use': 409,
  'idempotency.key_reused': 422,
  'organization.rate_limited': 429,
  'session.invalid_external_user_ref': 422,
  'verification.failed': 422,
  'common.service_unavailable': 503,
  'common.internal': 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetail {
  path: string;
  message: string;
}

export class AppError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
  }
}

export const notFound = (what = 'Resource') => new AppError('common.not_found', `${what} not found`);
