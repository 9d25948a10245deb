import type { JobsOptions } from 'bullmq';
import type { Config } from '../config';
import type { Queues } from '../queue/queues';

/**
 * A delivery job: one attempt per run, as many runs as the schedule has steps plus one, the waits computed
 * by the workers' `schedule` backoff (jobs/workers.ts). The first job of a delivery has the delivery's id;
 * a retried dead delivery gets a new job id, recorded as the delivery's current job.
 */
export function deliveryJobOptions(webhooks: Config['webhooks'], jobId: string): JobsOptions {
  return { jobId, attempts: webhooks.retrySchedule.length + 1, backoff: { type: 'schedule' } };
}

export async function enqueueDelivery(queues: Queues, webhooks: Config['webhooks'], deliveryId: string, jobId = deliveryId): Promise<void> {
  await queues.webhooks.add('deliver', { deliveryId }, deliveryJobOptions(webhooks, jobId));
}
