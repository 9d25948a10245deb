import Router from '@koa/router';
import type { Resources } from '../../../shared/resources';
import { checkReadiness } from '../../../shared/readiness';
import type { WebMetrics } from '../../middleware/metrics';
import type { AdminVerifier } from '../../../shared/identity/admin-verifier';
import { requireOperator } from '../../middleware/operator-auth';

/** Liveness and readiness, open (load balancers ask); metrics for operators only (queue names, volumes). */
export function healthRouter(app: Resources, metrics: WebMetrics, verifyIdentity: AdminVerifier): Router {
  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    const report = await checkReadiness(app);
    ctx.status = report.ready ? 200 : 503;
    ctx.body = { status: report.ready ? 'ready' : 'unavailable', checks: report.checks };
  });
  router.get('/metrics', requireOperator(verifyIdentity, app.config.operators), async (ctx) => {
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  });
  return router;
}
