import { UnrecoverableError, type Processor } from 'bullmq';
import type { AppContext } from '../../shared/context';
import { attemptDelivery, markDead } from '../../shared/webhooks/delivery';

/**
 * One attempt per job run. Retryable outcomes throw, and BullMQ waits the configured schedule (see
 * webhookBackoff); a permanent failure or the last attempt moves the delivery to the dead letters.
 */
export const webhooksProcessor = (app: AppContext): Processor => async (job) => {
  const deliveryId = job.data.deliveryId as string;
  const outcome = await attemptDelivery(app, deliveryId);
  if (outcome.kind === 'delivered') return { delivered: true, status: outcome.statusCode };
  const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
  if (outcome.kind === 'permanent' || lastAttempt) {
    await markDead(app, deliveryId);
    throw new UnrecoverableError(`delivery ${deliveryId} dead: ${outcome.statusCode ?? outcome.error}`);
  }
  throw new Error(`delivery attempt failed: ${outcome.statusCode ?? outcome.error}`);
};

/** Waits of the retry schedule (contract §7), in ms, for the attempt that just failed. */
export const webhookBackoff = (schedule: readonly number[]) => (attemptsMade: number) =>
  (schedule[Math.min(attemptsMade - 1, schedule.length - 1)] ?? 0) * 1000;
