import http from 'node:http';
import Koa from 'koa';
import { collectDefaultMetrics } from 'prom-client';
import type { Resources } from '../shared/resources';
import { createIdentityVerifier, type AdminVerifier } from '../shared/identity/admin-verifier';
import { requestId } from '../web/middleware/request-id';
import { errors } from '../web/middleware/errors';
import { authenticateOperator } from '../web/middleware/operator-auth';

export interface MetricsServer {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * A worker process's `/metrics` (what it counts, `Resources.metrics`, and the Node.js process metrics), on
 * METRICS_PORT when that is set (undefined otherwise), behind the same operator check as the web's `/metrics`:
 * the operator credential or an operator-role token, 401/403 in the error envelope otherwise. Nothing else is
 * served there (404).
 */
export async function serveWorkerMetrics(
  app: Pick<Resources, 'config' | 'log' | 'metrics'>,
  verifyAdmin: AdminVerifier = createIdentityVerifier(app.config.identity),
): Promise<MetricsServer | undefined> {
  const { port, host } = app.config.metrics;
  if (port === undefined) return undefined;
  const { registry } = app.metrics;
  collectDefaultMetrics({ register: registry });
  const koa = new Koa();
  koa.silent = true; // errors are logged by the errors middleware, once
  koa.use(requestId());
  koa.use(errors(app.log));
  koa.use(async (ctx) => {
    if (ctx.path !== '/metrics') return; // 404 in the envelope
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      ctx.status = 405;
      ctx.set('Allow', 'GET, HEAD');
      return;
    }
    await authenticateOperator(verifyAdmin, app.config.operators, ctx);
    ctx.set('Cache-Control', 'no-store');
    ctx.type = registry.contentType;
    ctx.body = await registry.metrics();
  });
  const server = http.createServer(koa.callback());
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, resolve));
  const address = server.address() as { port: number };
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  app.log.info({ port: address.port, host }, 'worker metrics served at /metrics');
  return {
    url: `http://${shown.includes(':') ? `[${shown}]` : shown}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
