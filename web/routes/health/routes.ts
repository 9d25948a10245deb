import { defineRoute, type Route } from '../../http/route';
import * as C from '../../openapi/components';

const operations = { method: 'get', tag: 'Operations', errors: [] } as const;

/** Liveness and readiness, open (load balancers ask); metrics for operators only (queue names, volumes). */
export const healthRoutes: readonly Route[] = [
  defineRoute({
    ...operations,
    path: '/healthz',
    id: 'health',
    summary: 'Liveness: the process answers',
    security: 'none',
    responses: { 200: { description: 'Alive', schema: C.Health } },
    handler: (ctx) => {
      ctx.body = { status: 'ok' };
    },
  }),
  defineRoute({
    ...operations,
    path: '/readyz',
    id: 'readiness',
    summary:
      'Readiness: PostgreSQL, Redis (in production, one that keeps its keys), S3 and each chain checked; 503 names what is down, or that the process is stopping',
    security: 'none',
    responses: {
      200: { description: 'Ready', schema: C.Readiness },
      503: {
        description:
          'Not ready: `unavailable` with the checks that failed (in production without their reasons, which the web logs), or `draining` while the process stops (it still answers requests)',
        schema: C.Readiness,
      },
    },
    handler: async (ctx, _input, { app, lifecycle, readiness }) => {
      if (lifecycle.draining) {
        ctx.status = 503;
        ctx.body = {
          status: 'draining',
          checks: { shutdown: { ok: false, error: 'the process is stopping; send new requests elsewhere' } },
        };
        return;
      }
      const report = await readiness.report(app);
      ctx.status = report.ready ? 200 : 503;
      ctx.body = { status: report.ready ? 'ready' : 'unavailable', checks: report.checks };
    },
  }),
  defineRoute({
    ...operations,
    path: '/metrics',
    id: 'metrics',
    summary: 'Prometheus metrics (operators: the operator credential, or a token with the operator role)',
    docs: 'operators',
    security: 'operator',
    responses: { 200: { description: 'Prometheus text format', contentType: 'text/plain' } },
    handler: async (ctx, _input, { metrics }) => {
      ctx.type = metrics.registry.contentType;
      ctx.body = await metrics.registry.metrics();
    },
  }),
];
