import {
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  ROOT_CONTEXT,
  SpanStatusCode,
  isValidTraceId,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
} from '@opentelemetry/api';
import type { Telemetry } from 'bullmq';

/**
 * The service's own spans, and the trace context a transaction carries from process to process. Everything here
 * is OpenTelemetry's API alone: without the SDK (tracing off, `telemetry/sdk.ts`) a span records nothing, a
 * traceparent is null, and each call costs a function call.
 */
export const tracer = trace.getTracer('works-api');

/** Tracing is on when an OTLP endpoint is configured, unless `OTEL_SDK_DISABLED=true` (sdk.ts). */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.toLowerCase() === 'true') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** Attribute names of the service's spans (the ids support staff search by). */
export const ATTR = {
  organization: 'works.organization_id',
  transaction: 'works.transaction_id',
  job: 'works.job_id',
  network: 'works.network',
  submission: 'works.submission_id',
  batchSize: 'works.batch.size',
  batchIndex: 'works.batch.index',
  delivery: 'works.delivery_id',
  attempt: 'works.webhook.attempt',
  event: 'works.webhook.event',
  outcome: 'works.webhook.outcome',
  txHash: 'works.chain.tx_hash',
  nonce: 'works.chain.nonce',
  blockNumber: 'works.chain.block_number',
} as const;

/** The W3C `traceparent` of the active span (or of `ctx`'s), or null when nothing is traced. */
export function traceparentOf(ctx: Context = context.active()): string | null {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent ?? null;
}

/**
 * The trace id of a W3C traceparent (`00-<trace id>-<span id>-<flags>`); null when there is none or it is not valid.
 * (A trace not sampled has an id too: its log lines carry it, though no span of it was exported; `sampledIn`.)
 */
export function traceIdOf(traceparent: string | null | undefined): string | null {
  const m = /^([0-9a-f]{2})-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(traceparent ?? '');
  return m && m[1] !== 'ff' && isValidTraceId(m[2]!) ? m[2]! : null;
}

/** Whether a traceparent's trace was sampled (its spans exported). */
export function sampledIn(traceparent: string | null | undefined): boolean {
  return traceIdOf(traceparent) !== null && (parseInt(traceparent!.slice(-2), 16) & 1) === 1;
}

/** A context whose parent is the span a stored traceparent names (the root context when there is none). */
export function contextOf(traceparent: string | null | undefined): Context {
  return traceparent ? propagation.extract(ROOT_CONTEXT, { traceparent }) : ROOT_CONTEXT;
}

/** Runs `fn` as part of the trace a stored traceparent names, or in no trace at all. */
export function withTraceparent<T>(traceparent: string | null | undefined, fn: () => T): T {
  return context.with(contextOf(traceparent), fn);
}

/**
 * The context work of the trace a stored traceparent names should run in: the active one when it is already in
 * that trace (its spans then nest under the active span), else the stored span's. With no traceparent, the active.
 */
export function contextFor(traceparent: string | null | undefined): Context {
  const active = trace.getSpanContext(context.active());
  if (!traceparent || (active && active.traceId === traceIdOf(traceparent))) return context.active();
  return contextOf(traceparent);
}

/** Runs `fn` in the trace a stored traceparent names (`contextFor`). */
export function inTraceOf<T>(traceparent: string | null | undefined, fn: () => T): T {
  return context.with(contextFor(traceparent), fn);
}

/**
 * BullMQ's telemetry option for a job added among others (`addBulk`, whose one context would otherwise be every
 * job's): the job carries the trace the traceparent names. Its format is bullmq-otel's metadata.
 */
export function jobTrace(traceparent: string | null | undefined): { telemetry: { metadata: string } } | undefined {
  return traceparent && bull ? { telemetry: { metadata: JSON.stringify({ traceparent }) } } : undefined;
}

/** The active context, kept by work that runs later on another's behalf (coalesce.ts). */
export function activeContext(): Context {
  return context.active();
}

/** Runs `fn` in a context kept earlier (`activeContext`). */
export function inContext<T>(ctx: Context, fn: () => T): T {
  return context.with(ctx, fn);
}

/** Runs `fn` outside whatever trace is active: work shared by many (a relayer's batch) belongs to none of them. */
export function detached<T>(fn: () => T): T {
  return context.with(ROOT_CONTEXT, fn);
}

export interface SpanOptions {
  readonly attributes?: Attributes;
  /** The parent, when it is not the active span. */
  readonly parent?: Context;
  readonly links?: Link[];
}

/**
 * Runs `fn` in a new active span that ends when `fn` settles; an error thrown is recorded on the span (its
 * message only: an error's other fields may carry what a trace must not) and thrown on.
 */
export function inSpan<T>(name: string, options: SpanOptions, fn: (span: Span) => Promise<T>): Promise<T> {
  // tracing off: no span records and no context manager keeps one, so the span and its context would change nothing
  if (!bull) {
    try {
      return fn(UNTRACED);
    } catch (err) {
      return Promise.reject(err); // as the tracer's path would: a throw becomes the promise's rejection
    }
  }
  const parent = options.parent ?? context.active();
  return tracer.startActiveSpan(name, { attributes: options.attributes, links: options.links }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  });
}

/** What `inSpan` hands `fn` while tracing is off: a span that records nothing (the API's own, as its no-op tracer's). */
const UNTRACED: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** Set exactly while the SDK runs (`sdk.ts`): tracing is on. */
let bull: Telemetry | undefined;

/** BullMQ's telemetry (its queue and worker spans, and the trace context each job carries), when tracing is on. */
export function bullTelemetry(): Telemetry | undefined {
  return bull;
}

/** Set by the SDK's start (`sdk.ts`), before any queue or worker is made. */
export function setBullTelemetry(telemetry: Telemetry | undefined): void {
  bull = telemetry;
}
