import { expect } from 'chai';
import { context, propagation, trace, TraceFlags, type Context } from '@opentelemetry/api';
import { core } from '@opentelemetry/sdk-node';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { Coalescer } from '../../shared/coalesce';
import { contextFor, contextOf, inSpan, sampledIn, traceIdOf } from '../../shared/telemetry/tracing';
import { samplingRatio } from '../../shared/telemetry/sdk';

const traceparent = (traceId: string, sampled = true) => `00-${traceId}-${'1'.repeat(16)}-0${sampled ? 1 : 0}`;
const traceIdIn = (ctx: Context) => trace.getSpanContext(ctx)?.traceId ?? null;

describe('telemetry: the trace context work carries', () => {
  // the API's context and propagation are no-ops until registered (the SDK's start does it in production)
  before(() => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new core.W3CTraceContextPropagator());
  });
  after(() => {
    context.disable();
    propagation.disable();
  });

  it('reads the sampling ratio as given, clamped to 0..1, and an empty or bad value as "all"', () => {
    expect([undefined, '', ' ', 'abc', '0.25', '0', '1', '3', '-1'].map(samplingRatio)).to.deep.equal([1, 1, 1, 1, 0.25, 0, 1, 1, 0]);
  });

  it('tells a sampled trace from one left out, by the traceparent’s flags', () => {
    const id = 'c'.repeat(32);
    expect([traceIdOf(traceparent(id)), sampledIn(traceparent(id))]).to.deep.equal([id, true]);
    expect([traceIdOf(traceparent(id, false)), sampledIn(traceparent(id, false))]).to.deep.equal([id, false]);
    expect(sampledIn(null)).to.equal(false);
  });

  it('runs work of a stored trace under the active span when that is in the same trace, else under the stored one', () => {
    const stored = traceparent('d'.repeat(32));
    const sameTrace = trace.setSpanContext(context.active(), {
      traceId: 'd'.repeat(32),
      spanId: '2'.repeat(16),
      traceFlags: TraceFlags.SAMPLED,
    });
    expect(context.with(sameTrace, () => contextFor(stored))).to.equal(sameTrace);
    const otherTrace = trace.setSpanContext(context.active(), { traceId: 'e'.repeat(32), spanId: '3'.repeat(16), traceFlags: 1 });
    expect(traceIdIn(context.with(otherTrace, () => contextFor(stored)))).to.equal('d'.repeat(32));
    expect(context.with(otherTrace, () => contextFor(null))).to.equal(otherTrace);
  });

  it('with tracing off (no SDK started), a span records nothing and a throw in its work is the promise’s rejection', async () => {
    const seen = await inSpan('untraced', { attributes: { 'works.job_id': 'j' } }, async (span) => {
      span.setAttributes({ 'works.nonce': 1 }).end();
      return { recording: span.isRecording(), valid: trace.isSpanContextValid(span.spanContext()) };
    });
    expect(seen).to.deep.equal({ recording: false, valid: false });
    // a callback that throws before its first await (not an async function) rejects; inSpan itself never throws
    let returned: Promise<never> | undefined;
    expect(() => {
      returned = inSpan('untraced', {}, () => {
        throw new Error('refused at once');
      });
    }).to.not.throw();
    expect(await returned!.catch((err: Error) => err.message)).to.equal('refused at once');
  });

  it('runs a coalesced call for one submitter in its trace, and one for several in none (never the first caller’s)', async () => {
    const seen: (string | null)[][] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const coalescer = new Coalescer<string, string>(
      async (items) => {
        seen.push([traceIdIn(context.active()), ...items]);
        if (items[0] === 'first') await held; // the next items arrive while this call is in flight
        return items;
      },
      { maxBatch: 10, maxInFlight: 1 },
    );
    const inTrace = (id: string, item: string) => context.with(contextOf(traceparent(id.repeat(32))), () => coalescer.submit(item));
    const first = inTrace('a', 'first');
    const later = [inTrace('b', 'second'), inTrace('c', 'third')];
    release();
    await Promise.all([first, ...later]);
    const alone = await inTrace('f', 'alone');
    expect(alone).to.equal('alone');
    expect(seen).to.deep.equal([
      ['a'.repeat(32), 'first'],
      [null, 'second', 'third'],
      ['f'.repeat(32), 'alone'],
    ]);
  });
});
