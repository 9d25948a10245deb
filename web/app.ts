import Koa from 'koa';
import helmet from 'koa-helmet';
import Router from '@koa/router';
import type { Resources } from '../shared/resources';
import { createIdentityVerifier, type AdminVerifier } from '../shared/identity/admin-verifier';
import { requestId } from './middleware/request-id';
import { errors } from './middleware/errors';
import { accessLog } from './middleware/access-log';
import { jsonBody } from './middleware/body';
import { createWebMetrics } from './middleware/metrics';
import { ReadinessWatch } from './readiness';
import { mount } from './http/mount';
import { buildOpenApiDocument } from './openapi/document';
import { ROUTES } from './routes';
import { queuesBoard } from './routes/queues-board/board';
import type { Lifecycle } from './drain';

export interface WebAppOptions {
  /** Overrides the JWKS-backed administrator verifier (tests with a local key set). */
  readonly verifyAdmin?: AdminVerifier;
  /** Whether the process is stopping (main.ts's drain); never, when not given. */
  readonly lifecycle?: Lifecycle;
  /** How long one read of the state behind /metrics' gauges is reused (5 s unless a test wants fresher). */
  readonly metricsStateMaxAgeMs?: number;
}

/** Builds the Koa application; listening and WebSockets are main.ts's business. */
export function createWebApp(app: Resources, options: WebAppOptions = {}): Koa {
  const koa = new Koa({ proxy: app.config.http.trustProxy });
  const metrics = createWebMetrics(app, options.metricsStateMaxAgeMs);
  const verifyAdmin = options.verifyAdmin ?? createIdentityVerifier(app.config.identity);
  koa.silent = true; // errors are logged by the errors middleware, once

  koa.use(requestId());
  koa.use(accessLog(app.log));
  koa.use(metrics.middleware);
  koa.use(errors(app.log));
  // frames denied outright (X-Frame-Options: DENY, and the CSP's frame-ancestors 'none')
  koa.use(
    helmet({
      contentSecurityPolicy: { directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
      xFrameOptions: { action: 'deny' },
    }),
  );
  koa.use(async (ctx, next) => {
    ctx.set('Cache-Control', 'no-store');
    await next();
  });
  koa.use(jsonBody(app.config.http.bodyLimitBytes));
  koa.use(queuesBoard(app, verifyAdmin));

  // the embedded identity provider's key set only where it is configured (never in production)
  const includeDev = Boolean(app.config.identity.devKeyFile);
  const router = new Router();
  const openApiJson = JSON.stringify(buildOpenApiDocument({ includeDev }));
  mount(
    router,
    ROUTES.filter((route) => includeDev || !route.devOnly),
    {
      app,
      verifyAdmin,
      metrics,
      openApiJson,
      lifecycle: options.lifecycle ?? { draining: false },
      readiness: new ReadinessWatch({ log: app.log, gauge: metrics.readinessChecks, env: app.config.env }),
    },
  );
  koa.use(router.routes()).use(router.allowedMethods());
  return koa;
}
