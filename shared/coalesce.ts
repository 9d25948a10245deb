import { ROOT_CONTEXT, type Context } from '@opentelemetry/api';
import { activeContext, inContext } from './telemetry/tracing';

export interface CoalescerOptions<In> {
  /** Items per call of `run` at most. */
  readonly maxBatch: number;
  /** Calls of `run` in flight at once; what arrives meanwhile waits and goes in the next call. */
  readonly maxInFlight: number;
  /** Items with the same key never share a call (a later one waits for the next call). */
  readonly key?: (item: In) => string;
}

interface Waiting<In, Out> {
  readonly item: In;
  /** The submitter's trace context: a call made for it alone runs in it. */
  readonly context: Context;
  readonly resolve: (out: Out) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * Batch-while-busy: an item submitted when a call is free runs at once, alone; items submitted while calls are
 * in flight wait for one to finish and then go together in one call of `run`. Idle, nothing waits; under load,
 * one statement serves everything that arrived meanwhile, so round trips and commits grow slower than the
 * load. `run` answers item by item, in order (undefined for an item it found nothing for); if it throws, every
 * item of that call fails with the error.
 */
export class Coalescer<In, Out> {
  private readonly waiting: Waiting<In, Out>[] = [];
  private inFlight = 0;

  constructor(
    private readonly run: (items: In[]) => Promise<readonly Out[]>,
    private readonly options: CoalescerOptions<In>,
  ) {}

  submit(item: In): Promise<Out> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, context: activeContext(), resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.options.maxInFlight && this.waiting.length > 0) {
      const batch = this.take();
      this.inFlight += 1;
      // a call for one submitter is part of its trace; one for several, of none (not of whoever made the call)
      inContext(batch.length === 1 ? batch[0]!.context : ROOT_CONTEXT, () => this.run(batch.map((w) => w.item)))
        .then(
          (outs) => batch.forEach((w, i) => w.resolve(outs[i] as Out)),
          (err) => batch.forEach((w) => w.reject(err)),
        )
        .finally(() => {
          this.inFlight -= 1;
          this.pump();
        });
    }
  }

  private take(): Waiting<In, Out>[] {
    const { key, maxBatch } = this.options;
    if (!key) return this.waiting.splice(0, maxBatch);
    const batch: Waiting<In, Out>[] = [];
    const keys = new Set<string>();
    for (let i = 0; i < this.waiting.length && batch.length < maxBatch;) {
      const k = key(this.waiting[i]!.item);
      if (keys.has(k)) {
        i += 1;
        continue;
      }
      keys.add(k);
      batch.push(...this.waiting.splice(i, 1));
    }
    return batch;
  }
}
