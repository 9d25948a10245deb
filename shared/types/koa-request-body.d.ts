import 'koa';

declare module 'koa' {
  interface Request {
    /** The parsed JSON body (web/middleware/body.ts). */
    body?: unknown;
  }
}
