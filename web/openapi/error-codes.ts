import type { ErrorCode } from '../../shared/errors';
import type { Operation, Security } from '../http/route';

/** What every route can answer, whatever it does. */
export const COMMON_ERRORS: readonly ErrorCode[] = [
  'common.bad_request',
  'common.not_found',
  'common.method_not_allowed',
  'common.headers_too_large',
  'common.service_unavailable',
  'common.internal',
];
/** What a route with a JSON body can answer about the body itself. */
export const BODY_ERRORS: readonly ErrorCode[] = ['common.payload_too_large', 'common.unsupported_media_type', 'common.validation_failed'];
/** What each kind of security can answer. */
export const SECURITY_ERRORS: Readonly<Record<Security, readonly ErrorCode[]>> = {
  apiKey: ['auth.unauthorized', 'auth.insufficient_scope', 'organization.inactive'],
  apiKeyOrSession: ['auth.unauthorized', 'auth.insufficient_scope', 'organization.inactive'],
  admin: ['auth.unauthorized', 'common.forbidden'],
  operator: ['auth.unauthorized', 'common.forbidden'],
  none: [],
};

/** Every error code an operation may answer. */
export function errorCodesOf(op: Operation): ErrorCode[] {
  return [...new Set([...COMMON_ERRORS, ...(op.body ? BODY_ERRORS : []), ...SECURITY_ERRORS[op.security], ...op.errors])];
}
