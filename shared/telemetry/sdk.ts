import { trace, type Attributes, type Context, type Link, type SpanKind } from '@opentelemetry/api';
import { core, NodeSDK } from '@opentelemetry/sdk-node';
import {
  BatchSpanProcessor,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SamplingResult,
  type Span,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { KoaInstrumentation, KoaLayerType } from '@opentelemetry/instrumentation-koa';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PinoInstrumentation } from '@opentelemetry/instrumentation-pino';
import { BullMQOtel } from 'bullmq-otel';
import type { Telemetry } from 'bullmq';
import { safeUrl } from '../safe-url';
import { setBullTelemetry, tracingRequested } from './tracing';

/**
 * Tracing (OpenTelemetry's Node SDK): on when an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, OTLP over HTTP), unless `OTEL_SDK_DISABLED=true`; otherwise nothing is
 * instrumented and nothing leaves the process. It must start before the instrumented libraries (http, koa, pg,
 * ioredis, pino) are loaded: each entry point imports its `telemetry/register-<role>.ts` first (start.ts).
 *
 * What a span may carry is decided here: Redis commands by name only (their arguments hold upload sessions and
 * key records), SQL as written (values are bound, never recorded), and every URL with its query values replaced
 * but for the harmless ones (the log's rule, `safeUrl`: a webhook URL or a WebSocket URL may carry a credential).
 */
let sdk: NodeSDK | undefined;

/** Starts tracing for a process of this role, once, if requested. */
export function startTelemetry(role: 'web' | 'worker' | 'dev', env: NodeJS.ProcessEnv = process.env): void {
  if (sdk || !tracingRequested(env)) return;
  sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME || `works-api-${role}`,
    spanProcessors: [new SafeAttributes(new BatchSpanProcessor(new OTLPTraceExporter()))],
    sampler: new ParentBasedSampler({ root: new NoHousekeeping(new TraceIdRatioBasedSampler(samplingRatio(env.OTEL_TRACES_SAMPLER_ARG))) }),
    // trace context only, no baggage (and the HTTP hook below drops a caller's trace headers): nothing a caller sends travels on
    textMapPropagator: new core.W3CTraceContextPropagator(),
    // traces only: no metrics (prom-client serves those) and no log export (logs go to stdout, with trace_id)
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => {
          // A partner's trace context is not ours to join: its sampled flag would override our sampling, its ids
          // would become the transaction's trace. Each request starts a trace of its own. (Run before the
          // instrumentation reads the headers; nothing else in the service reads these.)
          for (const header of INBOUND_TRACE_HEADERS) delete req.headers[header];
          return QUIET_PATHS.has((req.url ?? '').split('?')[0]!);
        },
        requireParentforOutgoingSpans: true,
      }),
      new KoaInstrumentation({ ignoreLayersType: [KoaLayerType.MIDDLEWARE] }),
      new PgInstrumentation({ requireParentSpan: true }),
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
      new PinoInstrumentation({ disableLogSending: true }),
    ],
  });
  sdk.start();
  setBullTelemetry(new BullMQOtel({ tracerName: 'bullmq' }) as Telemetry);
}

/** Exports what is still buffered and stops tracing (at the end of a process's shutdown). */
export async function stopTelemetry(): Promise<void> {
  const stopping = sdk;
  sdk = undefined;
  setBullTelemetry(undefined);
  await stopping?.shutdown().catch(() => undefined);
}

/** The share of new traces kept: `OTEL_TRACES_SAMPLER_ARG` between 0 and 1; unset, empty or not a number: all. */
export function samplingRatio(value: string | undefined): number {
  const ratio = value === undefined || value.trim() === '' ? NaN : Number(value);
  return Number.isFinite(ratio) ? Math.min(1, Math.max(0, ratio)) : 1;
}

const INBOUND_TRACE_HEADERS = ['traceparent', 'tracestate', 'baggage'];

/** Probes and scrapes, asked every few seconds: never traced. */
const QUIET_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * BullMQ traces its workers' own upkeep (polling for the next job, stalled checks): as roots of traces of their
 * own, every few seconds per queue, they would bury the traces of work. A job's processing is kept.
 */
const HOUSEKEEPING = /^(getNextJob|moveStalledJobsToWait|startStalledCheckTimer|close|pause|resume|rateLimit|delay) /;

class NoHousekeeping implements Sampler {
  constructor(private readonly inner: Sampler) {}

  shouldSample(ctx: Context, traceId: string, name: string, kind: SpanKind, attributes: Attributes, links: Link[]): SamplingResult {
    if (!trace.getSpanContext(ctx) && HOUSEKEEPING.test(name)) return { decision: SamplingDecision.NOT_RECORD };
    return this.inner.shouldSample(ctx, traceId, name, kind, attributes, links);
  }

  toString(): string {
    return `NoHousekeeping{${this.inner.toString()}}`;
  }
}

/** Attributes that hold a URL (or its query), as the HTTP instrumentation names them. */
const URL_ATTRIBUTES = ['url.full', 'http.url', 'http.target', 'url.query'];

/**
 * BullMQ puts a job's return value on its span's `job completed` event: a prepare's is the quote, with the creators'
 * names and e-mails. Never exported.
 */
const DROPPED_EVENT_ATTRIBUTES = ['bullmq.job.result'];

/**
 * BullMQ names a job's `add` span after the job (`add <queue>.<job name>`), and a job's name carries the labels
 * support staff search Bull Board by (queue/labels.ts: ids, a host): the span keeps the job's kind alone in its
 * name, so span names stay few; the whole name is still its `bullmq.job.name` attribute.
 */
const LABELLED_ADD = /^(add \S+) .+$/;

/**
 * Before a span is exported: replaces the query values of every URL attribute (but for the harmless ones) and
 * drops what BullMQ's events would carry of a job's data; a labelled job's `add` span is named after its kind.
 */
class SafeAttributes implements SpanProcessor {
  constructor(private readonly inner: SpanProcessor) {}

  onStart(span: Span, parent: Context): void {
    const labelled = LABELLED_ADD.exec(span.name);
    if (labelled) span.updateName(labelled[1]!);
    this.inner.onStart(span, parent);
  }

  onEnd(span: ReadableSpan): void {
    const attributes = span.attributes as Record<string, unknown>;
    for (const key of URL_ATTRIBUTES) {
      const value = attributes[key];
      if (typeof value !== 'string') continue;
      attributes[key] = key === 'url.query' ? safeUrl(`?${value}`).slice(1) : safeUrl(value);
    }
    for (const event of span.events) {
      const carried = event.attributes as Record<string, unknown> | undefined;
      if (carried) for (const key of DROPPED_EVENT_ATTRIBUTES) delete carried[key];
    }
    this.inner.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}
