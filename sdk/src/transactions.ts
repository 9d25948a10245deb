import type { Transport } from './transport';
import type { Transaction } from './types';

/** The part of a WebSocket the client uses: the `ws` package's and the WHATWG one both have it. */
export interface WebSocketLike {
  /** A `message` event has `data`: the frame's text (or its bytes). */
  addEventListener(type: 'open' | 'message' | 'close' | 'error', listener: (event: object) => void): void;
  close(code?: number, reason?: string): void;
}

/**
 * A WebSocket constructor taking `{ headers }` as its second argument, as the `ws` package's does (Node 20 has no
 * global WebSocket; an API key goes in the upgrade's Authorization header, which a browser's cannot set).
 */
export type WebSocketConstructor = new (url: string, options?: { headers?: Record<string, string> }) => WebSocketLike;

export interface WaitOptions {
  /** Called with the transaction each time it changes (every step), the final state included. */
  readonly onUpdate?: (transaction: Transaction) => void;
  /** Stops waiting: the promise rejects with the signal's reason (`AbortSignal.timeout(ms)` for a deadline). */
  readonly signal?: AbortSignal;
  /** How often polling asks (default 1000 ms), when there is no WebSocket or it closed early. */
  readonly pollIntervalMs?: number;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function text(data: unknown): string {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) return new TextDecoder().decode(data as ArrayBuffer);
  return String(data);
}

/**
 * Follows the socket's frames (contract §6) until a complete transaction. Resolves undefined when the socket
 * fails or closes before that (refused upgrade, lost connection): the caller polls then.
 */
function overSocket(
  t: Transport,
  WebSocket: WebSocketConstructor,
  id: string,
  report: (tx: Transaction) => void,
  signal?: AbortSignal,
): Promise<Transaction | undefined> {
  const url = new URL(`${t.baseUrl}/v1/ws/transactions/${encodeURIComponent(id)}`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  // a session token may ride in the query (contract §6); an API key only in the header
  const session = t.token.startsWith('wrs_');
  if (session) url.searchParams.set('access_token', t.token);
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const socket = session
      ? new WebSocket(url.toString())
      : new WebSocket(url.toString(), { headers: { Authorization: `Bearer ${t.token}` } });
    let done = false;
    const finish = (outcome: Transaction | undefined, error?: unknown) => {
      if (done) return;
      done = true;
      signal?.removeEventListener('abort', onAbort);
      if (error !== undefined) reject(error);
      else resolve(outcome);
    };
    const onAbort = () => {
      socket.close(1000, 'aborted');
      finish(undefined, signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.addEventListener('message', (event) => {
      let frame: { type?: string; transaction?: Transaction };
      try {
        frame = JSON.parse(text((event as { data?: unknown }).data));
      } catch {
        return;
      }
      if ((frame.type !== 'connected' && frame.type !== 'update') || !frame.transaction) return;
      report(frame.transaction);
      if (frame.transaction.is_complete) {
        finish(frame.transaction);
        socket.close(1000);
      }
    });
    socket.addEventListener('error', () => finish(undefined));
    socket.addEventListener('close', () => finish(undefined));
  });
}

/** `transactions.*` of the client. */
export function transactionsApi(t: Transport, WebSocket: WebSocketConstructor | undefined) {
  const get = (id: string): Promise<Transaction> =>
    t.call('repeatable', () => t.api.GET('/v1/transactions/{transaction_id}', { params: { path: { transaction_id: id } } }));
  return {
    /** A transaction's status, steps and result (spec 4.11). */
    get,
    /**
     * Resolves with the transaction once complete (`status` `finalized` or `failed`: check `status`), following
     * it over the WebSocket when the client has one, else (or when the socket drops early) by polling.
     */
    wait: async (id: string, options: WaitOptions = {}): Promise<Transaction> => {
      let last: string | undefined;
      const report = (tx: Transaction) => {
        const seen = JSON.stringify(tx);
        if (seen === last) return;
        last = seen;
        options.onUpdate?.(tx);
      };
      if (WebSocket) {
        const settled = await overSocket(t, WebSocket, id, report, options.signal);
        if (settled) return settled;
      }
      for (;;) {
        if (options.signal?.aborted) throw options.signal.reason;
        const tx = await t.call(
          'repeatable',
          () => t.api.GET('/v1/transactions/{transaction_id}', { params: { path: { transaction_id: id } }, signal: options.signal }),
          { signal: options.signal },
        );
        report(tx);
        if (tx.is_complete) return tx;
        await sleep(options.pollIntervalMs ?? 1000, options.signal);
      }
    },
  };
}

export type TransactionsApi = ReturnType<typeof transactionsApi>;
