import type { Middleware } from 'koa';
import type { Gauge, Registry } from 'prom-client';
import { createWebRegistry } from '../../shared/metrics/web-metrics';
import { stateReader, type StateDeps } from '../../shared/metrics/state';
import { sharedRead } from '../../shared/metrics/shared-read';

export interface WebMetrics {
  readonly registry: Registry;
  readonly middleware: Middleware;
  readonly readinessChecks: Gauge<'check'>;
}

/** How long one read of the state serves every scrape (and every gauge of a scrape). */
export const STATE_MAX_AGE_MS = 5000;

/** One registry per app instance, so several apps in one process (tests) do not collide. */
export function createWebMetrics(app: StateDeps, stateMaxAgeMs = STATE_MAX_AGE_MS): WebMetrics {
  const { registry, httpDuration, readinessChecks } = createWebRegistry(sharedRead(stateReader(app), stateMaxAgeMs));
  const middleware: Middleware = async (ctx, next) => {
    const end = httpDuration.startTimer();
    try {
      await next();
    } finally {
      end({ method: ctx.method, route: (ctx._matchedRoute as string | undefined) ?? 'unmatched', status: String(ctx.status) });
    }
  };
  return { registry, middleware, readinessChecks };
}
