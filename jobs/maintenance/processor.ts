import type { Processor } from 'bullmq';
import type { Resources } from '../../shared/resources';
import { reconcileTransactions } from '../../shared/transactions/reconcile';
import { reconcileDeliveries } from '../../shared/webhooks/reconcile';
import { pruneWebhookAttempts } from '../../shared/webhooks/attempts';
import { sweepUploads } from '../../shared/registration/upload-sweep';
import { scheduleRepeatable } from '../../shared/queue/jobs';

export const RECONCILE_JOB = 'reconcile-transactions';
export const PRUNE_WEBHOOK_ATTEMPTS_JOB = 'prune-webhook-attempts';
export const SWEEP_UPLOADS_JOB = 'sweep-uploads';
/** Attempts expire by the day; an hourly pass keeps each deletion small. */
const PRUNE_EVERY_MS = 3600_000;
/** Uploads expire within UPLOAD_TTL_SECONDS (10 minutes at most): one pass as often. */
const SWEEP_UPLOADS_EVERY_MS = 600_000;

/** Repeatable housekeeping (scheduled by the worker entry point). */
export const maintenanceProcessor =
  (app: Resources): Processor =>
  async (job) => {
    if (job.name === RECONCILE_JOB) {
      const idle = { idleSeconds: app.config.reconcile.idleSeconds };
      return { requeued: (await reconcileTransactions(app, idle)).length, deliveries: (await reconcileDeliveries(app, idle)).length };
    }
    if (job.name === PRUNE_WEBHOOK_ATTEMPTS_JOB)
      return { deleted: await pruneWebhookAttempts(app.db, app.config.webhooks.attemptRetentionDays) };
    if (job.name === SWEEP_UPLOADS_JOB) return { deleted: await sweepUploads(app) };
    throw new Error(`unknown maintenance job ${job.name}`);
  };

/** Schedules the housekeeping once per deployment (BullMQ keeps one schedule per id, however many workers call it). */
export async function scheduleMaintenance(app: Resources): Promise<void> {
  await scheduleRepeatable(app.queues, RECONCILE_JOB, app.config.reconcile.everyMs);
  await scheduleRepeatable(app.queues, PRUNE_WEBHOOK_ATTEMPTS_JOB, PRUNE_EVERY_MS);
  await scheduleRepeatable(app.queues, SWEEP_UPLOADS_JOB, SWEEP_UPLOADS_EVERY_MS);
}
