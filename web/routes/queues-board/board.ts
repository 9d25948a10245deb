import type { Middleware } from 'koa';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { KoaAdapter } from '@bull-board/koa';
import { QUEUE_NAMES } from '../../../shared/config';
import type { Resources } from '../../../shared/resources';
import type { AdminVerifier } from '../../../shared/identity/admin-verifier';
import { QUEUE_DEFINITIONS } from '../../../shared/queue/queues';
import { requireOperator } from '../../middleware/operator-auth';
import type { ServedElsewhere } from '../../http/route';

export const BOARD_PATH = '/admin/queues';

/** The board's page in the OpenAPI document; its static files and JSON API below it are Bull Board's own. */
export const queuesBoardOperation: ServedElsewhere = {
  servedBy: 'queuesBoard(), a middleware ahead of the router',
  method: 'get',
  path: BOARD_PATH,
  id: 'queuesBoard',
  summary: 'Bull Board: every queue, retry of failed and dead-lettered jobs (its JSON API lives below this path)',
  docs: 'operators',
  tag: 'Operations',
  security: 'operator',
  responses: { 200: { description: 'HTML', contentType: 'text/html' } },
  errors: [],
};

// The board's own scripts, styles and API only; its web fonts are left out rather than fetched from Google.
const BOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * A `<link>` of Bull Board's page that loads something from another origin: its template (index.ejs of
 * @bull-board/ui) links the IBM Plex fonts from fonts.googleapis.com, which BOARD_CSP refuses (a console error
 * on every load). The package ships no font files to serve instead; the board falls back to the system sans-serif.
 */
const EXTERNAL_LINK = /<link\b[^>]*\bhref=["']?(?:https?:)?\/\/[^>]*>\s*/gi;

/** The page's HTML without its links to other origins (its own links are relative to `<base href>`). */
function withoutExternalLinks(html: string): string {
  return html.replace(EXTERNAL_LINK, '');
}

/**
 * Bull Board at /admin/queues, every queue (the dead letters included), behind the operator check: its page,
 * static files and JSON API alike. Retrying a dead letter there sends the delivery again.
 */
export function queuesBoard(app: Resources, verifyAdmin: AdminVerifier): Middleware {
  const adapter = new KoaAdapter();
  adapter.setBasePath(BOARD_PATH);
  createBullBoard({
    queues: QUEUE_NAMES.map((name) => new BullMQAdapter(app.queues[name], { description: QUEUE_DEFINITIONS[name].description })),
    // @bull-board/koa declares itself against its own nested copy of @bull-board/api (types only differ).
    serverAdapter: adapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
    options: { uiConfig: { boardTitle: 'works-api queues' } },
  });
  const board = adapter.registerPlugin() as Middleware;
  const authenticate = requireOperator(verifyAdmin, app.config.operators);
  return async (ctx, next) => {
    if (ctx.path !== BOARD_PATH && !ctx.path.startsWith(`${BOARD_PATH}/`)) return next();
    await authenticate(ctx, async () => {
      ctx.set('Content-Security-Policy', BOARD_CSP);
      await board(ctx, next);
      // the page is rendered by the package's own template, so it is cleaned as served rather than replaced by a
      // copy that would go stale with each release's hashed asset names
      if (typeof ctx.body === 'string' && ctx.response.is('html')) ctx.body = withoutExternalLinks(ctx.body);
    });
  };
}
