import type { Middleware } from 'koa';
import { safeUrl, type Logger } from '../../shared/logger';

/** One line per request: no headers and no bodies, and credentials in query strings are masked. */
export function accessLog(log: Logger): Middleware {
  // Its fields are built here, none of them a path the logger redacts: redaction, run on every line, would
  // cost a request a few percent of its CPU for nothing.
  const lines = log.child({}, { redact: { paths: [] } });
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const level = ctx.status >= 500 ? 'error' : 'info';
      lines[level](
        { request_id: ctx.state.requestId, method: ctx.method, url: safeUrl(ctx.url), status: ctx.status, ms: Math.round(ms * 10) / 10 },
        'request',
      );
    }
  };
}
