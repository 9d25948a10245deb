import { UnrecoverableError, type Processor } from 'bullmq';
import type { Resources } from '../../shared/resources';
import { attemptDelivery, withRunSecrets, type AttemptDeps } from '../../shared/webhooks/delivery';
import { reviveDeadDelivery } from '../../shared/webhooks/dead-letters';
import { enqueueDeadLetter, enqueueRetries, type DeliveryLabels, type JobData, type JobOf } from '../../shared/queue/jobs';
import { RetryDelivery } from '../../shared/webhooks/retry-policy';
import { DeliveryConnections } from '../../shared/webhooks/connections';
import { ResolvedHosts } from '../../shared/webhooks/resolved-hosts';
import { refusedAddress } from '../../shared/webhooks/destination';
import { claimDelivery, DeliveryRepo, type Delivery } from '../../shared/webhooks/repo';
import { labelsOf } from '../../shared/webhooks/service';

/**
 * One attempt per job run. A retryable outcome throws RetryDelivery and BullMQ waits the delay it carries;
 * a permanent failure or the last run marks the delivery dead (with the attempt, in one statement) and
 * puts it in the `webhooks-dead` queue. A `deliver-batch` job (webhooks/enqueue.ts) makes the first attempt
 * of each of its deliveries, side by side, and hands each that needs more to a job of its own. The process's
 * deliveries share kept-alive connections (connections.ts), batched statements (repo.ts) and their hosts' recent
 * addresses (resolved-hosts.ts).
 */
export const webhooksProcessor = (app: Resources): Processor<JobData['webhooks']> => {
  const using: AttemptDeps = {
    repo: new DeliveryRepo(app.db),
    connections: new DeliveryConnections({ keepAliveMs: app.config.webhooks.keepAliveMs, maxInFlight: app.config.webhooks.concurrency }),
    // an answer the address policy refuses is not kept: it costs only the attempts of its moment
    resolve: new ResolvedHosts({ keep: (addresses) => !refusedAddress(app.config.webhooks, addresses) }).resolve,
  };
  return (job) => ('deliveryIds' in job.data ? deliverBatch(app, using, job, job.data.deliveryIds) : deliver(app, using, job, job.data));
};

type Loaded = { delivery: NonNullable<Awaited<ReturnType<DeliveryRepo['load']>>> } | { skipped: string };

/** The delivery, if this job is the one to attempt it now. */
async function loadFor(using: AttemptDeps, job: JobOf<'webhooks'>, deliveryId: string): Promise<Loaded> {
  const delivery = await using.repo.load(deliveryId);
  if (!delivery) return { skipped: 'unknown delivery' };
  if (delivery.status === 'delivered') return { skipped: 'already delivered' };
  if (delivery.status === 'dead') return { skipped: 'dead' };
  const current = delivery.currentJobId ?? delivery.id;
  if (job.id !== current) return { skipped: `superseded by job ${current}` };
  return { delivery };
}

async function deliver(app: Resources, using: AttemptDeps, job: JobOf<'webhooks'>, data: { deliveryId: string; retriesMade?: number }) {
  const { deliveryId } = data;
  const loaded = await loadFor(using, job, deliveryId);
  if ('skipped' in loaded) {
    // Only an operator runs a finished job again (Bull Board's retry): the same as retrying the dead letter.
    // (A worker lost between marking the delivery dead and failing the job would also land here, once the
    // job stalls: the delivery is then sent again, which receivers absorb by its delivery id.)
    if (loaded.skipped === 'dead')
      return { requeued_as: await reviveDeadDelivery({ db: app.db, queues: app.queues, webhooks: app.config.webhooks }, deliveryId) };
    return loaded;
  }
  const decision = await attemptDelivery(
    app,
    loaded.delivery,
    {
      retryIndex: job.attemptsMade + (data.retriesMade ?? 0),
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
      throw new UnrecoverableError(`attempt ${decision.attempt} failed (${decision.reason}); ${await deadLetter(app, loaded.delivery)}`);
    }
  }
}

/**
 * The first attempts of a batch, each on its own: what one delivery meets (an answer, an error of ours) never
 * touches another's. The job completes with each delivery's outcome (Bull Board shows it); a delivery to
 * retry gets a job of its own, delayed by its first wait, with the rest of the schedule.
 */
async function deliverBatch(app: Resources, shared: AttemptDeps, job: JobOf<'webhooks'>, deliveryIds: readonly string[]) {
  // the batch's deliveries go to one URL, almost always one key's: its webhook secret is opened once for them
  const outcomes = await withRunSecrets(app.box, undefined, (secrets) =>
    Promise.all(deliveryIds.map((deliveryId) => firstAttempt(app, { ...shared, secrets }, job, deliveryId))),
  );
  return Object.fromEntries(outcomes);
}

/** One delivery's first attempt in a batch job, and what follows it, told as the job's outcome for that delivery. */
async function firstAttempt(app: Resources, using: AttemptDeps, job: JobOf<'webhooks'>, deliveryId: string): Promise<[string, string]> {
  const final = app.config.webhooks.retrySchedule.length === 0;
  try {
    const loaded = await loadFor(using, job, deliveryId);
    if ('skipped' in loaded) return [deliveryId, `skipped: ${loaded.skipped}`];
    const decision = await attemptDelivery(app, loaded.delivery, { retryIndex: 0, final }, using);
    if (decision.kind === 'delivered') return [deliveryId, `delivered (attempt ${decision.attempt}, HTTP ${decision.statusCode})`];
    if (decision.kind === 'dead')
      return [deliveryId, `attempt ${decision.attempt} failed (${decision.reason}); ${await deadLetter(app, loaded.delivery)}`];
    return [
      deliveryId,
      `attempt ${decision.attempt} failed (${decision.reason}); ${await handOn(app, job, deliveryId, decision.delayMs, 1, labelsOf(loaded.delivery))}`,
    ];
  } catch (err) {
    // no attempt was recorded (our side failed): the delivery's own job makes it after the first wait
    const delayMs = (app.config.webhooks.retrySchedule[0] ?? 1) * 1000;
    const reason = err instanceof Error ? err.message : String(err);
    return [deliveryId, `not attempted (${reason}); ${await handOn(app, job, deliveryId, delayMs, 0)}`];
  }
}

/** The delivery's next attempts to a job of its own, made its current job first; the reconciler's if that fails. */
async function handOn(
  app: Resources,
  job: JobOf<'webhooks'>,
  deliveryId: string,
  delayMs: number,
  retriesMade = 1,
  labels?: DeliveryLabels,
): Promise<string> {
  const jobId = `${deliveryId}-next-${Date.now().toString(36)}`;
  try {
    if (!(await claimDelivery(app.db, deliveryId, job.id ?? null, jobId))) return 'moved on meanwhile';
    await enqueueRetries(app.queues, app.config.webhooks.retrySchedule, deliveryId, jobId, delayMs, retriesMade, labels);
    return `next in ${delayMs / 1000} s as job ${jobId}`;
  } catch (err) {
    return `not handed on (${(err as Error).message}); the reconciler re-enqueues it`;
  }
}

/** The dead delivery to the dead-letter queue, labelled for support staff to find it (queue/labels.ts). */
async function deadLetter(app: Resources, delivery: Delivery): Promise<string> {
  app.metrics.webhookDeadLetters.inc();
  return enqueueDeadLetter(app.queues, delivery.id, labelsOf(delivery)).then(
    () => 'dead-lettered to webhooks-dead',
    (err: Error) => `dead, but not put in webhooks-dead (${err.message}); retry it with the CLI`,
  );
}
