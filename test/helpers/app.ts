import { Writable } from 'node:stream';
import type { Job, Queue } from 'bullmq';
import type { Config } from '../../shared/config';
import { createLogger } from '../../shared/logger';
import { openResources, type Resources } from '../../shared/resources';
import { createWebApp, type WebAppOptions } from '../../web/app';
import { attachLiveTracking, type LiveTracking } from '../../web/ws';
import { createHttpServer } from '../../web/http-server';
import { testServices } from './services';
import { checkResponse } from './contract';

/** Every log line written by every app and worker of the run, for the secret scan. */
export const logLines: string[] = [];

export const logSink = new Writable({
  write(chunk, _encoding, done) {
    for (const line of String(chunk).split('\n')) if (line) logLines.push(line);
    done();
  },
});

export const testLogger = () => createLogger('debug', logSink);

/** The log lines written from now on, for assertions about a test's own lines rather than the run's. */
export function logsFromNow(): () => string[] {
  const from = logLines.length;
  return () => logLines.slice(from);
}

export interface TestApp {
  readonly url: string;
  readonly context: Resources;
  /** The WebSocket and socket.io side of this web process. */
  readonly live: LiveTracking;
  close(): Promise<void>;
}

/** A real web process in this process: its own connections, listening on a free port. */
export async function startApp(config: Config = testServices().config, options: WebAppOptions = {}): Promise<TestApp> {
  const context = openResources(config, testLogger(), 'web');
  await whenConnected(context);
  const server = createHttpServer(createWebApp(context, options).callback());
  const live = attachLiveTracking(server, context);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    context,
    live,
    async close() {
      await live.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await context.close();
    },
  };
}

export interface Reply<T = any> {
  readonly status: number;
  readonly headers: Headers;
  readonly body: T;
  readonly text: string;
}

export interface RequestOptions {
  readonly token?: string;
  readonly body?: unknown;
  /** Sent verbatim instead of JSON-encoding `body`. */
  readonly raw?: string | Buffer;
  readonly headers?: Record<string, string>;
}

/**
 * Each exchange of the test client goes on a connection of its own. The client and the servers share this
 * process's event loop, and a stall of a few seconds on a loaded machine can let a pooled connection be picked
 * as the server closes it for idleness: the request then fails with ECONNRESET before reaching any route, a race
 * that keep-alive clients can only retry (nodejs/undici#3492, nodejs/node#47130), and not every request of a
 * test is safe to send twice. Tests of keep-alive itself use agents of their own.
 */
export const OWN_CONNECTION = { Connection: 'close' } as const;

export async function call<T = any>(base: string, method: string, path: string, options: RequestOptions = {}): Promise<Reply<T>> {
  const headers: Record<string, string> = { ...OWN_CONNECTION, ...options.headers };
  if (options.token) headers.Authorization = `Bearer ${options.token}`;
  let body: string | Buffer | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body: body as BodyInit | undefined });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  checkResponse(method, base + path, res.status, res.headers.get('content-type'), parsed, text);
  return { status: res.status, headers: res.headers, body: parsed as T, text };
}

/** Asserts the error envelope of docs/api.md#errors and returns it. */
export function expectError(
  reply: Reply,
  status: number,
  code: string,
): { code: string; message: string; request_id: string; details?: unknown } {
  const { error } = (reply.body ?? {}) as { error?: { code: string; message: string; request_id: string } };
  if (reply.status !== status || !error || error.code !== code) {
    throw new Error(`expected ${status} ${code}, got ${reply.status} ${reply.text.slice(0, 300)}`);
  }
  if (typeof error.message !== 'string' || error.request_id !== reply.headers.get('x-request-id')) {
    throw new Error(`malformed envelope: ${reply.text}`);
  }
  return error;
}

/** Resolves once Redis and every chain connection are up (events, not polling). */
export async function whenConnected(context: Resources): Promise<void> {
  const redisUp =
    context.redis.status === 'ready' ? Promise.resolve() : new Promise<void>((resolve) => context.redis.once('ready', () => resolve()));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all([redisUp, ...context.chains.networks.map((n) => context.chains.api(n.network))]),
    new Promise((resolve) => (timer = setTimeout(resolve, 10_000))), // a dependency a test made unreachable on purpose
  ]).finally(() => clearTimeout(timer));
}

/** Waits until the clock is past `at` (ms since the epoch): time-driven, never a sleep tuned to the machine. */
export async function untilPast(at: number): Promise<void> {
  while (Date.now() <= at) await new Promise((r) => setTimeout(r, at + 1 - Date.now()));
}

/** Waits until `probe` returns a value that is not undefined: a condition, re-checked, bounded. */
export async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * The queue's job once it is in `state`. A worker writes its rows before BullMQ moves the job on (and counts the
 * run in attemptsMade), so a test that saw the rows waits for the move before it reads the job; the job is read
 * after its state was seen, never before (a job read just before the move has the state's new name but the old count).
 */
export function jobReaches(queue: Queue, id: string, state: 'completed' | 'failed'): Promise<Job> {
  return eventually(
    async () => ((await queue.getJobState(id)) === state ? queue.getJob(id) : undefined),
    `job ${id} in ${queue.name} to be ${state}`,
  );
}
