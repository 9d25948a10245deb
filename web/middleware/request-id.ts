import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';

// What this app keeps in ctx.state, typed once for every middleware (Koa's default state is untyped).
declare module 'koa' {
  interface DefaultState {
    /** Set first of all, by requestId(): the error envelope and every log line carry it. */
    requestId: string;
    /** Who passed the operator check (Bull Board). */
    operator?: string;
  }
}

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's X-Request-Id when it is short and safe, else a fresh one. */
export const pickRequestId = (incoming: string | undefined): string => (incoming && SAFE_ID.test(incoming) ? incoming : randomUUID());

/** Reuses a caller's X-Request-Id when it is short and safe, else mints one; echoes it on every response. */
export function requestId(): Middleware {
  return async (ctx, next) => {
    const id = pickRequestId(ctx.get('X-Request-Id'));
    ctx.state.requestId = id;
    ctx.set('X-Request-Id', id);
    await next();
  };
}
