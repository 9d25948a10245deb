import { Counter, Histogram, Registry } from 'prom-client';

/** A transaction reaching its end, as the metrics see it (recorded once the change has committed). */
export interface Settlement {
  readonly network: string;
  readonly type: string;
  readonly status: 'finalized' | 'failed';
  /** When it was confirmed (the transaction's creation) and when it ended. */
  readonly confirmedAt: Date;
  readonly settledAt: Date;
}

/**
 * What happens in a worker process, counted where it happens: one registry per `Resources` (so several
 * processes' worth in one test process do not collide), served by the worker's own `/metrics` (jobs/metrics-server.ts).
 * The state the web reports at scrape time is in web-metrics.ts; README "Operations / metrics" lists both.
 */
export class EventMetrics {
  readonly registry = new Registry();
  readonly transactionsSettled = new Counter({
    name: 'works_api_transactions_settled_total',
    help: 'Transactions that reached their end, by network, type and status (finalized or failed)',
    labelNames: ['network', 'type', 'status'] as const,
    registers: [this.registry],
  });
  readonly confirmToFinalized = new Histogram({
    name: 'works_api_confirm_to_finalized_seconds',
    help: 'Time from confirm (the transaction created) to its block finalized, by network and type',
    labelNames: ['network', 'type'] as const,
    buckets: [5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 3600],
    registers: [this.registry],
  });
  readonly confirmToWebhook = new Histogram({
    name: 'works_api_confirm_to_webhook_seconds',
    help: "Time from confirm to the event's webhook first acknowledged (2xx), by event",
    labelNames: ['event'] as const,
    buckets: [5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1800, 3600, 7200],
    registers: [this.registry],
  });
  readonly chainBatchSize = new Histogram({
    name: 'works_api_chain_batch_size',
    help: 'Calls per relayer batch signed and submitted, by network',
    labelNames: ['network'] as const,
    buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 1500],
    registers: [this.registry],
  });
  readonly webhookAttempts = new Counter({
    name: 'works_api_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome: delivered, retry (will be retried), failed (permanent, or the schedule ran out)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly webhookDeadLetters = new Counter({
    name: 'works_api_webhook_dead_letters_total',
    help: 'Webhook deliveries given up and moved to the dead-letter queue (webhooks-dead)',
    registers: [this.registry],
  });
  readonly relayerFeesPaid = new Counter({
    name: 'works_api_relayer_fees_paid_total',
    help: "Fees the relayer paid for its batches (the chain's TransactionFeePaid), in the chain's token units, by network",
    labelNames: ['network'] as const,
    registers: [this.registry],
  });

  /**
   * Every series that can appear starts at 0 (a counter first seen at 1 hides that first event from `rate()` and
   * `increase()` after each start of a worker).
   */
  constructor(networks: readonly string[] = []) {
    for (const network of networks) {
      this.relayerFeesPaid.inc({ network }, 0);
      this.chainBatchSize.zero({ network });
      for (const type of TRANSACTION_TYPES) {
        this.confirmToFinalized.zero({ network, type });
        for (const status of ['finalized', 'failed'] as const) this.transactionsSettled.inc({ network, type, status }, 0);
      }
    }
    for (const outcome of ['delivered', 'retry', 'failed']) this.webhookAttempts.inc({ outcome }, 0);
    for (const event of EVENTS) this.confirmToWebhook.zero({ event });
  }

  /** A transaction finalized or failed: counted, and its confirm → finalized time observed. */
  settled(s: Settlement): void {
    this.transactionsSettled.inc({ network: s.network, type: s.type, status: s.status });
    if (s.status === 'finalized')
      this.confirmToFinalized.observe({ network: s.network, type: s.type }, seconds(s.confirmedAt, s.settledAt));
  }

  /** One webhook attempt's outcome; a delivery's (first and only) acknowledgement observes confirm → webhook. */
  attempted(outcome: 'delivered' | 'retry' | 'dead', delivery: { readonly event: string; readonly confirmedAt: Date | null }): void {
    this.webhookAttempts.inc({ outcome: outcome === 'dead' ? 'failed' : outcome });
    if (outcome === 'delivered' && delivery.confirmedAt)
      this.confirmToWebhook.observe({ event: delivery.event }, seconds(delivery.confirmedAt, new Date()));
  }
}

const TRANSACTION_TYPES = ['register', 'add_version'] as const;
const EVENTS = ['work_registered', 'work_updated', 'work_failed'] as const;

const seconds = (from: Date, to: Date) => Math.max(0, (to.getTime() - new Date(from).getTime()) / 1000);
