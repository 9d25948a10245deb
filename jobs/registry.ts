import type { ProcessorRegistry } from './workers';

/**
 * The processor of each queue. A queue appears here once its processor exists. Each processor's module is loaded
 * when a worker starts its queue, not before: a process loads the code of the queues it runs (WORKER_QUEUES), so
 * a webhooks worker never loads the chain client (@polkadot/api) nor a chain worker PDFKit, and starts in about a
 * third of the time with half the heap (docs/performance.md, section 47).
 */
/* eslint-disable @typescript-eslint/no-require-imports -- each loaded on demand (above) */
export const PROCESSORS: ProcessorRegistry = {
  prepare: (ctx) => (require('./prepare/processor') as typeof import('./prepare/processor')).prepareProcessor(ctx),
  chain: (ctx) => (require('./chain/processor') as typeof import('./chain/processor')).chainProcessor(ctx),
  webhooks: (ctx) => (require('./webhooks/processor') as typeof import('./webhooks/processor')).webhooksProcessor(ctx),
  'webhooks-dead': (ctx) => (require('./webhooks-dead/processor') as typeof import('./webhooks-dead/processor')).webhooksDeadProcessor(ctx),
  maintenance: (ctx) => (require('./maintenance/processor') as typeof import('./maintenance/processor')).maintenanceProcessor(ctx),
  certificates: (ctx) => (require('./certificates/processor') as typeof import('./certificates/processor')).certificatesProcessor(ctx),
};

/** The housekeeping's schedules, kept in Redis by a worker that runs the maintenance queue (loaded by that worker only). */
export const keepMaintenanceScheduled: typeof import('./maintenance/processor').keepMaintenanceScheduled = (app) =>
  (require('./maintenance/processor') as typeof import('./maintenance/processor')).keepMaintenanceScheduled(app);
