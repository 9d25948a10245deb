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

const schedules = (app: Resources): [string, number][] => [
  [RECONCILE_JOB, app.config.reconcile.everyMs],
  [PRUNE_WEBHOOK_ATTEMPTS_JOB, PRUNE_EVERY_MS],
  [SWEEP_UPLOADS_JOB, SWEEP_UPLOADS_EVERY_MS],
];

/** Schedules the housekeeping once per deployment (BullMQ keeps one schedule per id, however many workers call it). */
export async function scheduleMaintenance(app: Resources): Promise<void> {
  for (const [name, everyMs] of schedules(app)) await scheduleRepeatable(app.queues, name, everyMs);
}

/**
 * Schedules the housekeeping and keeps it scheduled. Redis may come back empty (a restart without persistence,
 * a flush, a cluster shard lost with its replica) and take the schedules with it, the reconciler's included,
 * which is what would find the work that Redis lost. So each time the connection is ready again, and every
 * reconcile period (a cluster stays ready while one of its shards comes back empty), a schedule that is missing
 * is put back. Returns the function that stops watching.
 */
export async function keepMaintenanceScheduled(app: Resources): Promise<() => void> {
  await scheduleMaintenance(app);
  const restore = () =>
    void restoreMissing(app).catch((err: Error) => app.log.warn({ err: { message: err.message } }, 'could not schedule maintenance'));
  app.redis.on('ready', restore);
  const timer = setInterval(restore, app.config.reconcile.everyMs).unref();
  return () => {
    clearInterval(timer);
    app.redis.off('ready', restore);
  };
}

/**
 * A schedule is missing when Redis lost it, or dead when its next run is two periods late: BullMQ adds a
 * schedule's next job in a call of its own, and a schedule whose call failed (Redis away longer than the
 * worker's retries) keeps its record but never runs again. Either is put back, anew.
 */
async function restoreMissing(app: Resources): Promise<void> {
  const queue = app.queues.maintenance;
  for (const [name, everyMs] of schedules(app)) {
    const scheduler = await queue.getJobScheduler(name);
    const dead = scheduler?.next !== undefined && scheduler.next < Date.now() - 2 * everyMs;
    if (scheduler && !dead) continue;
    if (dead) await queue.removeJobScheduler(name);
    await scheduleRepeatable(app.queues, name, everyMs);
    app.log.warn(
      { schedule: name },
      dead ? 'maintenance schedule had stopped: put back' : 'maintenance schedule was missing from Redis: put back',
    );
  }
}
