import { AppError, type ErrorCode } from '../../shared/errors';
import { authenticateApiKey, unauthorized } from '../../shared/api-keys/service';
import { authenticateSession, SESSION_PREFIX } from '../../shared/sessions/service';
import type { Principal } from '../../shared/api-keys/types';
import type { Logger } from '../../shared/logger';
import type { AuthDeps } from '../middleware/auth';
import { isUnavailable } from '../middleware/errors';

export interface LiveCredentials {
  /** The `Authorization` header: `Bearer <API key or session token>`. */
  readonly authorization?: string | undefined;
  /** `?access_token=`: end-user session tokens only, for browsers that cannot set headers on a WebSocket. */
  readonly accessToken?: string | undefined;
}

/**
 * Who opens a live socket (docs/api.md#websocket, docs/api.md#sessions): any API key of the organization in `Authorization`, or a
 * session token there or in `?access_token=`. An API key is refused in the query string, where proxies and
 * access logs would keep it.
 */
export async function authenticateLive(deps: AuthDeps, credentials: LiveCredentials): Promise<Principal> {
  const header = credentials.authorization?.trim();
  const token = header ? /^Bearer[ ]+(\S+)$/i.exec(header)?.[1] : undefined;
  if (token) return token.startsWith(SESSION_PREFIX) ? authenticateSession(deps, token) : authenticateApiKey(deps, token);
  if (header) throw unauthorized();
  const query = credentials.accessToken;
  if (!query) throw unauthorized();
  if (!query.startsWith(SESSION_PREFIX)) {
    throw new AppError(
      'auth.unauthorized',
      'access_token carries end-user session tokens only; send an API key in the Authorization header',
    );
  }
  return authenticateSession(deps, query);
}

export interface Refusal {
  readonly status: number;
  readonly code: ErrorCode;
  readonly message: string;
  readonly headers: Record<string, string>;
}

/** The error envelope's parts for a failure while opening a socket, as the HTTP error middleware would map it. */
export function refusalOf(err: unknown, log: Logger, requestId: string): Refusal {
  if (err instanceof AppError) return { status: err.status, code: err.code, message: err.message, headers: { ...err.headers } };
  if (isUnavailable(err)) {
    log.warn({ err: { message: (err as Error).message }, request_id: requestId }, 'live socket: dependency unavailable');
    return {
      status: 503,
      code: 'common.service_unavailable',
      message: 'A dependency of the service is unavailable; retry shortly',
      headers: { 'Retry-After': '5' },
    };
  }
  log.error({ err, request_id: requestId }, 'live socket: unhandled error');
  return { status: 500, code: 'common.internal', message: 'Internal error', headers: {} };
}

export const envelope = (refusal: Refusal, requestId: string) => ({
  error: { code: refusal.code, message: refusal.message, request_id: requestId },
});
