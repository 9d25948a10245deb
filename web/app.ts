import Koa from 'koa';
import helmet from 'koa-helmet';
import type { Resources } from '../shared/resources';
import { createIdentityVerifier, type AdminVerifier } from '../shared/identity/admin-verifier';
import { requestId } from './middleware/request-id';
import { errors } from './middleware/errors';
import { accessLog } from './middleware/access-log';
import { jsonBody } from './middleware/body';
import { createWebMetrics } from './middleware/metrics';
import { healthRouter } from './routes/health/router';
import { apiKeysRouter } from './routes/api-keys/router';
import { sessionsRouter } from './routes/sessions/router';
import { devIdpRouter } from './routes/dev-idp/router';
import { worksRouter } from './routes/works/router';
import { worksReadRouter } from './routes/works-read/router';
import { transactionsRouter } from './routes/transactions/router';
import { queuesBoard } from './routes/queues-board/board';
import { docsRouter } from './routes/docs/router';

export interface WebAppOptions {
  /** Overrides the JWKS-backed administrator verifier (tests with a local key set). */
  readonly verifyAdmin?: AdminVerifier;
}

/** Builds the Koa application; listening and WebSockets are main.ts's business. */
export function createWebApp(app: Resources, options: WebAppOptions = {}): Koa {
  const koa = new Koa({ proxy: app.config.http.trustProxy });
  const metrics = createWebMetrics(app.queues);
  const verifyAdmin = options.verifyAdmin ?? createIdentityVerifier(app.config.identity);
  koa.silent = true; // errors are logged by the errors middleware, once

  koa.use(requestId());
  koa.use(accessLog(app.log));
  koa.use(metrics.middleware);
  koa.use(errors(app.log));
  // frames denied outright (X-Frame-Options: DENY, and the CSP's frame-ancestors 'none')
  koa.use(helmet({ contentSecurityPolicy: { directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } }, xFrameOptions: { action: 'deny' } }));
  koa.use(async (ctx, next) => {
    ctx.set('Cache-Control', 'no-store');
    await next();
  });
  koa.use(jsonBody(app.config.http.bodyLimitBytes));
  koa.use(queuesBoard(app, verifyAdmin));

  const routers = [docsRouter({ includeDev: Boolean(app.config.identity.devKeyFile) }), healthRouter(app, metrics, verifyAdmin), apiKeysRouter(app, verifyAdmin), sessionsRouter(app), worksRouter(app), worksReadRouter(app), transactionsRouter(app)];
  if (app.config.identity.devKeyFile) routers.push(devIdpRouter(app.config.identity.devKeyFile));
  for (const router of routers) koa.use(router.routes()).use(router.allowedMethods());
  return koa;
}
