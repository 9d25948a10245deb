import type { Processor } from 'bullmq';
import type { AppContext } from '../../shared/context';
import { reconcileTransactions } from '../../shared/transactions/reconcile';

export const RECONCILE_JOB = 'reconcile-transactions';

/** Repeatable housekeeping (scheduled by the worker entry point). */
export const maintenanceProcessor = (app: AppContext): Processor => async (job) => {
  if (job.name === RECONCILE_JOB) return { requeued: (await reconcileTransactions(app, { idleSeconds: app.config.reconcile.idleSeconds })).length };
  throw new Error(`unknown maintenance job ${job.name}`);
};

/** Schedules the reconciler once per deployment (BullMQ keeps one schedule per id, however many workers call it). */
export async function scheduleMaintenance(app: AppContext): Promise<void> {
  await app.queues.maintenance.upsertJobScheduler(RECONCILE_JOB, { every: app.config.reconcile.everyMs }, { name: RECONCILE_JOB });
}
