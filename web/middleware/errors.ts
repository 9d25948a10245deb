import type { Middleware, Context } from 'koa';
import { AppError, type ErrorCode } from '../../shared/errors';
import { isRedisUnavailable } from '../../shared/redis/client';
import type { Logger } from '../../shared/logger';

/** Status codes raised by Koa and its body parser, mapped to stable codes. */
const HTTP_CODES: Record<number, ErrorCode> = {
  400: 'common.bad_request',
  404: 'common.not_found',
  413: 'common.payload_too_large',
  415: 'common.unsupported_media_type',
};

export function sendError(ctx: Context, code: ErrorCode, status: number, message: string, details?: unknown): void {
  ctx.status = status;
  ctx.body = { error: { code, message, request_id: ctx.state.requestId, ...(details ? { details } : {}) } };
}

/**
 * Maps every failure to the envelope `{ error: { code, message, request_id, details? } }`. Anything not
 * expected becomes a logged 500 with a generic message: no stack, SQL or secret reaches the client.
 */
export function errors(log: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.body === undefined || ctx.body === null) {
        if (ctx.status === 404) sendError(ctx, 'common.not_found', 404, 'No such route');
        else if (ctx.status === 405) sendError(ctx, 'common.method_not_allowed', 405, `Allowed methods: ${ctx.response.get('Allow')}`);
      }
    } catch (err) {
      const { requestId } = ctx.state;
      if (err instanceof AppError) {
        for (const [name, value] of Object.entries(err.headers ?? {})) ctx.set(name, value);
        sendError(ctx, err.code, err.status, err.message, err.details);
        return;
      }
      const status = (err as { status?: number; expose?: boolean }).status;
      if (typeof status === 'number' && HTTP_CODES[status] && (err as { expose?: boolean }).expose !== false) {
        sendError(ctx, HTTP_CODES[status], status, status === 400 ? 'The request body is not valid JSON' : (err as Error).message);
        return;
      }
      if (isUnavailable(err)) {
        log.warn({ err: { message: (err as Error).message }, request_id: requestId }, 'dependency unavailable');
        ctx.set('Retry-After', '5');
        sendError(ctx, 'common.service_unavailable', 503, 'A dependency of the service is unavailable; retry shortly');
        return;
      }
      log.error({ err, request_id: requestId, route: ctx._matchedRoute }, 'unhandled error');
      sendError(ctx, 'common.internal', 500, 'Internal error');
    }
  };
}

/** A dependency (Redis, PostgreSQL) is down: 503, not 500. */
export function isUnavailable(err: unknown): boolean {
  if (isRedisUnavailable(err)) return true;
  const code = (err as { code?: string })?.code;
  const message = (err as Error)?.message ?? '';
  return UNAVAILABLE_CODES.has(code ?? '') || UNAVAILABLE_MESSAGES.test(message);
}

/** Errors of a connection (Node's) and PostgreSQL's answers that say it cannot serve now, whoever asks. */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  '57P01', // admin shutdown
  '57P03', // cannot connect now: starting up, shutting down, in recovery
  '53300', // too many connections
  '25006', // a read-only transaction: the URL leads to a standby (mid-failover)
  '57014', // a statement cancelled: past the web's WEB_STATEMENT_TIMEOUT_MS (a lock held too long), or by an operator
]);

/**
 * knex's and pg's words for the same. pg's two timeouts of a bounded pool (db/knex.ts): a statement's answer ("Query read
 * timeout", after the statement's text when knex sent it) and a new connection's handshake ("timeout expired").
 */
const UNAVAILABLE_MESSAGES =
  /Knex: Timeout acquiring a connection|Connection terminated|is not queryable|(^| - )Query read timeout$|^timeout expired$/i;
