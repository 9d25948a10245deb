import type { Middleware } from 'koa';
import { Registry, Histogram, Gauge, collectDefaultMetrics } from 'prom-client';
import type { Queues } from '../../shared/queue/queues';

export interface WebMetrics {
  readonly registry: Registry;
  readonly middleware: Middleware;
}

/** One registry per app instance, so several apps in one process (tests) do not collide. */
export function createWebMetrics(queues: Queues): WebMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  new Gauge({
    name: 'queue_jobs',
    help: 'Jobs per queue and state',
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
    async collect() {
      await Promise.all(
        Object.entries(queues).map(async ([name, queue]) => {
          const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed', 'prioritized');
          for (const [state, value] of Object.entries(counts)) this.set({ queue: name, state }, value);
        }),
      );
    },
  });
  const middleware: Middleware = async (ctx, next) => {
    const end = duration.startTimer();
    try {
      await next();
    } finally {
      end({ method: ctx.method, route: (ctx._matchedRoute as string | undefined) ?? 'unmatched', status: String(ctx.status) });
    }
  };
  return { registry, middleware };
}
