import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { FEE_WINDOW_BLOCKS, type OperationsState } from './state';

export interface WebRegistry {
  readonly registry: Registry;
  readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  /** Each readiness check's result at the latest `/readyz` (web/readiness.ts sets it). */
  readonly readinessChecks: Gauge<'check'>;
}

/**
 * The web's metrics: HTTP request durations, the Node.js process metrics, and the operators' state gauges,
 * each set from `state()` at scrape time (every gauge of one scrape from the same read). A part of the state
 * that could not be read leaves its series out; the scrape still answers. One registry per web app, so several
 * apps in one process (tests) do not collide. The workers' event metrics are in events.ts.
 */
export function createWebRegistry(state: () => Promise<OperationsState>): WebRegistry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const httpDuration = new Histogram({
    name: 'works_api_http_request_duration_seconds',
    help: 'HTTP request duration by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const gauge = <L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    set: (gauge: Gauge<L>, s: OperationsState) => void,
  ): Gauge<L> =>
    new Gauge<L>({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const s = await state();
        this.reset();
        set(this, s);
      },
    });

  gauge('works_api_queue_jobs', 'Jobs per queue and state', ['queue', 'state'], (g, s) => {
    for (const q of s.queues) for (const [state, count] of Object.entries(q.counts)) g.set({ queue: q.queue, state }, count);
  });
  gauge('works_api_queue_oldest_waiting_age_seconds', 'Age of the oldest waiting job per queue (0 when none waits)', ['queue'], (g, s) => {
    for (const q of s.queues) g.set({ queue: q.queue }, q.oldestWaitingAgeSeconds);
  });
  gauge(
    'works_api_transactions',
    'Transactions not yet finalized or failed, by network and status (pending, submitted, in_block)',
    ['network', 'status'],
    (g, s) => {
      for (const t of s.openTransactions ?? []) g.set({ network: t.network, status: t.status }, t.count);
    },
  );
  gauge(
    'works_api_transaction_oldest_open_age_seconds',
    'Age of the oldest transaction not yet finalized or failed, by network (0 when none)',
    ['network'],
    (g, s) => {
      for (const t of s.oldestOpenAgeSeconds ?? []) g.set({ network: t.network }, t.seconds);
    },
  );
  gauge('works_api_webhook_dead_letters', 'Webhook deliveries dead-lettered now', [], (g, s) => {
    if (s.deadLetters === undefined) g.remove();
    else g.set(s.deadLetters);
  });
  gauge('works_api_relayer_free_balance', "The relayer's free balance, in the chain's token units, by network", ['network'], (g, s) => {
    for (const c of s.chains) if (c.relayerFree !== undefined) g.set({ network: c.network }, c.relayerFree);
  });
  gauge(
    'works_api_relayer_fee_blocks_covered',
    `Blocks of fees the relayer's free balance still covers at its recent rate (fees paid in the last ${FEE_WINDOW_BLOCKS} blocks); absent when it paid none`,
    ['network'],
    (g, s) => {
      for (const c of s.chains) if (c.feeBlocksCovered !== undefined) g.set({ network: c.network }, c.feeBlocksCovered);
    },
  );
  gauge('works_api_chain_head_lag_blocks', 'Best block number minus finalized block number, by network', ['network'], (g, s) => {
    for (const c of s.chains) if (c.headLagBlocks !== undefined) g.set({ network: c.network }, c.headLagBlocks);
  });
  gauge('works_api_chain_connected', "Whether the process's connection to the network's node is up (1) or not (0)", ['network'], (g, s) => {
    for (const c of s.chains) g.set({ network: c.network }, c.connected ? 1 : 0);
  });
  const readinessChecks = new Gauge({
    name: 'works_api_readiness_check_ok',
    help: 'Whether each readiness check passed (1) or failed (0) at the latest GET /readyz; the reason of a failure is logged',
    labelNames: ['check'] as const,
    registers: [registry],
  });
  return { registry, httpDuration, readinessChecks };
}
