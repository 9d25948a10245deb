import { WorksApiError } from './errors';

/** How the client repeats a call that failed for a passing reason (docs/api.md#errors, docs/api.md#idempotency, docs/api.md#rate-limits). */
export interface RetryOptions {
  /** Attempts in all, the first included: an integer from 1 to 20 (default 5; 1 turns retries off). */
  readonly maxAttempts?: number;
  /** The first backoff step (default 250 ms); step n is `baseDelayMs · 2ⁿ`, with full jitter. */
  readonly baseDelayMs?: number;
  /** The longest backoff step (default 10 s). */
  readonly maxDelayMs?: number;
  /** The longest `Retry-After` waited out (default 60 s); a longer one is thrown at once. */
  readonly maxRetryAfterMs?: number;
}

/**
 * Whether a call may be sent twice.
 * - `repeatable`: reads, a revoke (204 again), prepare (again replaces the quote), a session (another token),
 *   and the init writes, which carry an `Idempotency-Key` reused on every attempt (the server answers the first
 *   response again). Retried after a 429, a 502/503/504, a 409 `idempotency.key_in_use` or any network error.
 * - `once`: confirm (a second one answers 404 `registration.prepared_not_found` and would hide the transaction
 *   the first one started), API key creation (a second key) and the upload (a presigned PUT takes one write).
 *   Retried only when the server certainly did nothing: a 429 (the limit is checked first) or a connection
 *   that was never opened.
 */
export type Safety = 'repeatable' | 'once';

const DEFAULTS: Required<RetryOptions> = { maxAttempts: 5, baseDelayMs: 250, maxDelayMs: 10_000, maxRetryAfterMs: 60_000 };
/** The most attempts a policy may ask for: more would hammer a failing server for no gain. */
export const MAX_ATTEMPTS = 20;

/**
 * The policy `options` asks for, field by field over the defaults (an explicit `undefined` keeps the default).
 * Throws a `RangeError` for a `maxAttempts` that is not an integer from 1 to `MAX_ATTEMPTS`, or a delay that is
 * not a finite number of milliseconds ≥ 0.
 */
export function retryPolicy(options: RetryOptions | false | undefined): Required<RetryOptions> {
  if (options === false) return { ...DEFAULTS, maxAttempts: 1 };
  const policy: Required<RetryOptions> = {
    maxAttempts: options?.maxAttempts ?? DEFAULTS.maxAttempts,
    baseDelayMs: options?.baseDelayMs ?? DEFAULTS.baseDelayMs,
    maxDelayMs: options?.maxDelayMs ?? DEFAULTS.maxDelayMs,
    maxRetryAfterMs: options?.maxRetryAfterMs ?? DEFAULTS.maxRetryAfterMs,
  };
  if (!Number.isInteger(policy.maxAttempts) || policy.maxAttempts < 1 || policy.maxAttempts > MAX_ATTEMPTS)
    throw new RangeError(`retry.maxAttempts must be an integer from 1 to ${MAX_ATTEMPTS}, not ${policy.maxAttempts}`);
  for (const field of ['baseDelayMs', 'maxDelayMs', 'maxRetryAfterMs'] as const) {
    const value = policy[field];
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
      throw new RangeError(`retry.${field} must be a finite number of milliseconds ≥ 0, not ${String(value)}`);
  }
  return policy;
}

/** Errors of a connection that never opened: the request was not sent. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function causeCode(err: unknown): string | undefined {
  const cause = (err as { cause?: { code?: unknown; errors?: { code?: unknown }[] } })?.cause;
  const code = cause?.code ?? cause?.errors?.[0]?.code;
  return typeof code === 'string' ? code : undefined;
}

/** What a call is, for its errors: a write (its outcome is unknown when sent and unanswered) and its Idempotency-Key. */
export interface CallContext {
  readonly write?: boolean;
  readonly idempotencyKey?: string;
}

/**
 * A rejected fetch (no response) as a `WorksApiError` with status 0, and whether the request may have gone out:
 * `network.outcome_unknown` for a write that may have been sent, else `network.error`.
 */
export function networkError(err: unknown, attempts: number, context: CallContext = {}): { error: WorksApiError; sent: boolean } {
  const code = causeCode(err);
  const sent = !(code && NOT_SENT.has(code));
  const unknown = sent && context.write === true;
  const error = new WorksApiError({
    status: 0,
    code: unknown ? 'network.outcome_unknown' : 'network.error',
    message: `${unknown ? 'The write was sent but no answer came back; it may have taken effect' : 'No response'}: ${
      (err as Error)?.message ?? String(err)
    }${code ? ` (${code})` : ''}`,
    attempts,
    requestSent: sent,
    idempotencyKey: context.idempotencyKey,
    cause: err,
  });
  return { error, sent };
}

function retryable(error: WorksApiError, sent: boolean, safety: Safety): boolean {
  if (error.status === 429) return true;
  if (error.status === 0) return safety === 'repeatable' || !sent;
  if (safety === 'once') return false;
  return error.status === 502 || error.status === 503 || error.status === 504 || error.code === 'idempotency.key_in_use';
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** One attempt: resolves with the result or rejects with a `WorksApiError` and whether the request went out. */
export type Attempt<T> = (attempt: number) => Promise<T>;

/** Thrown by an attempt: the error, and whether the server may have received the request. */
export class AttemptFailed extends Error {
  constructor(
    readonly error: WorksApiError,
    readonly sent: boolean,
  ) {
    super(error.message);
  }
}

/**
 * Runs `attempt` until it succeeds, the failure is not retryable for `safety`, or the attempts run out. The
 * wait is the answer's `Retry-After` when it has one (plus up to one base step of jitter), else exponential
 * backoff with full jitter. `signal` aborts a wait.
 */
export async function withRetries<T>(
  options: RetryOptions | false | undefined,
  safety: Safety,
  attempt: Attempt<T>,
  signal?: AbortSignal,
): Promise<T> {
  const policy = retryPolicy(options);
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (!(err instanceof AttemptFailed)) throw err;
      const { error, sent } = err;
      if (n >= policy.maxAttempts || !retryable(error, sent, safety)) throw error;
      if (error.retryAfterMs !== undefined && error.retryAfterMs > policy.maxRetryAfterMs) throw error;
      const backoff = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (n - 1));
      const delay = error.retryAfterMs !== undefined ? error.retryAfterMs + Math.random() * policy.baseDelayMs : Math.random() * backoff;
      await sleep(delay, signal);
    }
  }
}
