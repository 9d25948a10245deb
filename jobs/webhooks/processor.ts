import { UnrecoverableError, type Processor } from 'bullmq';
import type { Resources } from '../../shared/resources';
import { attemptDelivery, type AttemptDeps } from '../../shared/webhooks/delivery';
import { reviveDeadDelivery } from '../../shared/webhooks/dead-letters';
import { enqueueDeadLetter, type JobData, type JobOf } from '../../shared/queue/jobs';
import { RetryDelivery } from '../../shared/webhooks/retry-policy';
import { DeliveryConnections } from '../../shared/webhooks/connections';
import { DeliveryRepo } from '../../shared/webhooks/repo';

/**
 * One attempt per job run. A retryable outcome throws RetryDelivery and BullMQ waits the delay it carries;
 * a permanent failure or the last run marks the delivery dead (with the attempt, in one statement) and
 * puts it in the `webhooks-dead` queue. The process's deliveries share kept-alive connections (connections.ts)
 * and batched statements (repo.ts).
 */
export const webhooksProcessor = (app: Resources): Processor<JobData['webhooks']> => {
  const using: AttemptDeps = {
    repo: new DeliveryRepo(app.db),
    connections: new DeliveryConnections({ keepAliveMs: app.config.webhooks.keepAliveMs, maxInFlight: app.config.webhooks.concurrency }),
  };
  return (job) => deliver(app, using, job);
};

async function deliver(app: Resources, using: AttemptDeps, job: JobOf<'webhooks'>) {
  const deliveryId = job.data.deliveryId;
  const delivery = await using.repo.load(deliveryId);
  if (!delivery) return { skipped: 'unknown delivery' };
  if (delivery.status === 'delivered') return { skipped: 'already delivered' };
  if (delivery.status === 'dead') {
    // Only an operator runs a finished job again (Bull Board's retry): the same as retrying the dead letter.
    // (A worker lost between marking the delivery dead and failing the job would also land here, once the
    // job stalls: the delivery is then sent again, which receivers absorb by its delivery id.)
    return { requeued_as: await reviveDeadDelivery({ db: app.db, queues: app.queues, webhooks: app.config.webhooks }, deliveryId) };
  }
  const current = delivery.currentJobId ?? delivery.id;
  if (job.id !== current) return { skipped: `superseded by job ${current}` };

  const decision = await attemptDelivery(
    app,
    delivery,
    {
      retryIndex: job.attemptsMade,
      final: job.attemptsMade + 1 >= (job.opts.attempts ?? 1),
    },
    using,
  );
  switch (decision.kind) {
    case 'delivered':
      return { delivered: true, attempt: decision.attempt, status_code: decision.statusCode };
    case 'retry':
      throw new RetryDelivery(
        `attempt ${decision.attempt} failed (${decision.reason}); next in ${decision.delayMs / 1000} s`,
        decision.delayMs,
      );
    case 'dead': {
      // Never let this job run again on its own: a rerun of a dead delivery's job counts as an operator's retry.
      const parked = await enqueueDeadLetter(app.queues, deliveryId).then(
        () => 'dead-lettered to webhooks-dead',
        (err: Error) => `dead, but not put in webhooks-dead (${err.message}); retry it with the CLI`,
      );
      throw new UnrecoverableError(`attempt ${decision.attempt} failed (${decision.reason}); ${parked}`);
    }
  }
}
