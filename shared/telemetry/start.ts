import { tracingRequested } from './tracing';

type Sdk = typeof import('./sdk');
let sdk: Sdk | undefined;

/**
 * Starts tracing when it is configured. The SDK and its instrumentations (some 70 MB and most of a second to
 * load) are loaded only then: a process that does not trace never loads them.
 */
export function startTracingIfRequested(role: 'web' | 'worker' | 'dev'): void {
  if (!tracingRequested()) return;
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on demand, before anything instrumented
  sdk ??= require('./sdk') as Sdk;
  sdk.startTelemetry(role);
}

/** How long a stopping process waits for its last spans to be exported (a collector away must not hold it up). */
const FLUSH_MS = 2000;

/** Exports what is still buffered (for FLUSH_MS at most) and stops tracing, if it was started. */
export async function stopTracing(): Promise<void> {
  if (!sdk) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([sdk.stopTelemetry(), new Promise<void>((resolve) => (timer = setTimeout(resolve, FLUSH_MS)))]);
  clearTimeout(timer);
}
