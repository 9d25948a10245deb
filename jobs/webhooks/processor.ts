import { UnrecoverableError, type Job, type Processor } from 'bullmq';
import type { AppContext } from '../../shared/context';
import { attemptDelivery, type AttemptDeps } from '../../shared/webhooks/delivery';
import { addDeadLetter, reviveDeadDelivery } from '../../shared/webhooks/dead-letters';
import { DeliveryConnections } from '../../shared/webhooks/connections';
import { DeliveryRepo } from '../../shared/webhooks/repo';

/** A retryable attempt failed; `delayMs` (the schedule, lengthened by a Retry-After) is read by the backoff. */
export class RetryDelivery extends Error {
  override readonly name = 'RetryDelivery';
  constructor(message: string, readonly delayMs: number) {
    super(message);
  }
}

/**
 * One attempt per job run. A retryable outcome throws RetryDelivery and BullMQ waits the delay it carries;
 * a permanent failure or the last run marks the delivery dead (with the attempt, in one statement) and
 * puts it in the `webhooks-dead` queue. The process's deliveries share kept-alive connections (connections.ts)
 * and batched statements (repo.ts).
 */
export const webhooksProcessor = (app: AppContext): Processor => {
  const using: AttemptDeps = {
    repo: new DeliveryRepo(app.db),
    connections: new DeliveryConnections({ keepAliveMs: app.config.webhooks.keepAliveMs }),
  };
  return (job) => deliver(app, using, job);
};

async function deliver(app: AppContext, using: AttemptDeps, job: Job) {
  const deliveryId = job.data.deliveryId as string;
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

  const decision = await attemptDelivery(app, delivery, {
    retryIndex: job.attemptsMade,
    final: job.attemptsMade + 1 >= (job.opts.attempts ?? 1),
  }, using);
  switch (decision.kind) {
    case 'delivered':
      return { delivered: true, attempt: decision.attempt, status_code: decision.statusCode };
    case 'retry':
      throw new RetryDelivery(`attempt ${decision.attempt} failed (${decision.reason}); next in ${decision.delayMs / 1000} s`, decision.delayMs);
    case 'dead': {
      // Never let this job run again on its own: a rerun of a dead delivery's job counts as an operator's retry.
      const parked = await addDeadLetter(app.queues, deliveryId).then(
        () => 'dead-lettered to webhooks-dead',
        (err: Error) => `dead, but not put in webhooks-dead (${err.message}); retry it with the CLI`,
      );
      throw new UnrecoverableError(`attempt ${decision.attempt} failed (${decision.reason}); ${parked}`);
    }
  }
}

/**
 * The `schedule` backoff: the delay the failed run asked for, else the step of the retry schedule (contract
 * §7) for the attempt that just failed. Set on every worker; only delivery jobs use the `schedule` type.
 */
export const webhookBackoff = (schedule: readonly number[]) => (attemptsMade: number, _type?: string, err?: Error) => {
  if (err instanceof RetryDelivery) return err.delayMs;
  return (schedule[Math.min(attemptsMade - 1, schedule.length - 1)] ?? 0) * 1000;
};
