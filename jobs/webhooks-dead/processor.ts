import { UnrecoverableError, type Processor } from 'bullmq';
import type { Resources } from '../../shared/resources';
import type { JobData } from '../../shared/queue/jobs';
import { deadReason, reviveDeadDelivery } from '../../shared/webhooks/dead-letters';

/**
 * The dead-letter queue. A dead letter's first run parks it in `failed`, where Bull Board offers its retry,
 * with the reason it died. A retried run sends the delivery again (a fresh delivery job with the full
 * schedule) and completes, which removes the dead letter. Either run does nothing once the delivery is no
 * longer dead (retried through the CLI meanwhile).
 */
export const webhooksDeadProcessor =
  (app: Resources): Processor<JobData['webhooks-dead']> =>
  async (job) => {
    const deliveryId = job.data.deliveryId;
    if (!job.data.parked) {
      const reason = await deadReason(app.db, deliveryId);
      if (!reason) return { skipped: 'the delivery is not dead' };
      await job.updateData({ ...job.data, parked: true });
      throw new UnrecoverableError(reason);
    }
    const jobId = await reviveDeadDelivery({ db: app.db, queues: app.queues, webhooks: app.config.webhooks }, deliveryId, {
      keepDeadLetter: true,
    });
    return jobId ? { requeued_as: jobId } : { skipped: 'the delivery is not dead' };
  };
