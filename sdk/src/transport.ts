import createFetchClient, { type Client } from 'openapi-fetch';
import type { paths } from './generated/openapi';
import { errorFromResponse } from './errors';
import { AttemptFailed, networkError, retryPolicy, withRetries, type CallContext, type RetryOptions, type Safety } from './retry';

/** A call's abort signal, and what its errors should say about it (a write, its Idempotency-Key). */
export interface CallOptions extends CallContext {
  readonly signal?: AbortSignal;
}

/** What every namespace of the client shares: the typed fetch client and the retry policy. */
export interface Transport {
  readonly api: Client<paths>;
  readonly baseUrl: string;
  readonly token: string;
  readonly fetch: typeof globalThis.fetch;
  readonly retry: RetryOptions | false | undefined;
  /**
   * One logical call: `send` is called once per attempt (each builds its request afresh, the same
   * Idempotency-Key included), its answer's data returned, or a `WorksApiError` thrown.
   */
  call<T>(safety: Safety, send: () => Promise<{ data?: T; error?: unknown; response: Response }>, options?: CallOptions): Promise<T>;
}

export interface TransportOptions {
  readonly baseUrl: string;
  readonly token: string;
  readonly fetch?: typeof globalThis.fetch;
  readonly retry?: RetryOptions | false;
}

export function createTransport(options: TransportOptions): Transport {
  retryPolicy(options.retry); // a RangeError now, not at the first retry
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  // looked up at call time, so a fetch replaced after the client was made (a test's interceptor) is used
  const fetchImpl: typeof globalThis.fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const api = createFetchClient<paths>({
    baseUrl,
    fetch: (request: Request) => fetchImpl(request),
    headers: { Authorization: `Bearer ${options.token}` },
  });
  return {
    api,
    baseUrl,
    token: options.token,
    fetch: fetchImpl,
    retry: options.retry,
    call: (safety, send, { signal, ...context } = {}) =>
      withRetries(
        options.retry,
        safety,
        async (attempt) => {
          let answer: Awaited<ReturnType<typeof send>>;
          try {
            answer = await send();
          } catch (err) {
            // the caller's abort is no network failure: thrown as it is, never retried
            if (signal?.aborted) throw signal.reason;
            const { error, sent } = networkError(err, attempt, context);
            throw new AttemptFailed(error, sent);
          }
          if (answer.response.ok) return answer.data as never;
          throw new AttemptFailed(errorFromResponse(answer.response, answer.error, attempt, context.idempotencyKey), true);
        },
        signal,
      ),
  };
}
