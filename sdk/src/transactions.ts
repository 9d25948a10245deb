import type { Transport } from './transport';
import type { Transaction } from './types';

/** The part of a WebSocket the client uses: the `ws` package's and the WHATWG one both have it. */
export interface WebSocketLike {
  /** A `message` event has `data`: the frame's text (or its bytes). */
  addEventListener(type: 'open' | 'message' | 'close' | 'error', listener: (event: object) => void): void;
  close(code?: number, reason?: string): void;
  /** The `ws` package's: its `ping` event (the server's heartbeat) counts as a sign of life. */
  on?(event: 'ping', listener: () => void): unknown;
  /** The `ws` package's: drops the connection at once, without a closing handshake a dead peer never answers. */
  terminate?(): void;
}

/**
 * A WebSocket constructor. One taking `{ headers }` as its second argument, as the `ws` package's does (Node 20 has
 * no global WebSocket), carries the token in the upgrade's Authorization header. A browser-style one (whose second
 * argument is the subprotocols, so `{ headers }` makes it throw) can only carry a session token, in `?access_token=`;
 * with an API key it is not used, and `wait` polls.
 */
export type WebSocketConstructor = new (url: string, options?: { headers?: Record<string, string> }) => WebSocketLike;

/** The server's default heartbeat: it pings every 30 s (`WS_HEARTBEAT_SECONDS`). */
const HEARTBEAT_MS = 30_000;

export interface WaitOptions {
  /**
   * Called with the transaction each time it changes (every step), the final state included. When it throws, the
   * wait stops (the socket closed) and rejects with what it threw.
   */
  readonly onUpdate?: (transaction: Transaction) => void;
  /** Stops waiting: the promise rejects with the signal's reason (`AbortSignal.timeout(ms)` for a deadline). */
  readonly signal?: AbortSignal;
  /** How often polling asks (default 1000 ms), when there is no WebSocket or it closed early. */
  readonly pollIntervalMs?: number;
  /** How long the WebSocket may take to open (default 10 s); then it is dropped and `wait` polls. */
  readonly handshakeTimeoutMs?: number;
  /**
   * How long an open WebSocket may stay silent, no frame and no ping (default 60 s, twice the server's heartbeat);
   * then it is dropped as dead and `wait` polls. A browser's WebSocket hides pings: there only frames count, so a
   * transaction quiet for that long is followed by polling from then on.
   */
  readonly livenessTimeoutMs?: number;
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

/** Opens the socket: the token in the Authorization header, or a session token in the query for a browser-style one. */
function open(t: Transport, WebSocket: WebSocketConstructor, id: string): WebSocketLike | undefined {
  const url = new URL(`${t.baseUrl}/v1/ws/transactions/${encodeURIComponent(id)}`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  try {
    return new WebSocket(url.toString(), { headers: { Authorization: `Bearer ${t.token}` } });
  } catch {
    // a browser-style constructor refuses `{ headers }` (it takes subprotocols there)
  }
  // a session token may ride in the query (docs/api.md#websocket); an API key never does
  if (!t.token.startsWith('wrs_')) return undefined;
  url.searchParams.set('access_token', t.token);
  try {
    return new WebSocket(url.toString());
  } catch {
    return undefined;
  }
}

/**
 * Follows the socket's frames (docs/api.md#websocket) until a complete transaction. Resolves undefined when the socket
 * cannot be made, fails, closes, does not open in time or falls silent before that: the caller polls then.
 * Rejects with the signal's reason, or with what `report` threw.
 */
function overSocket(
  t: Transport,
  WebSocket: WebSocketConstructor,
  id: string,
  report: (tx: Transaction) => void,
  options: WaitOptions,
): Promise<Transaction | undefined> {
  const { signal } = options;
  const handshakeMs = options.handshakeTimeoutMs ?? 10_000;
  const livenessMs = options.livenessTimeoutMs ?? 2 * HEARTBEAT_MS;
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const socket = open(t, WebSocket, id);
    if (!socket) return resolve(undefined);
    let done = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const drop = () => {
      try {
        if (socket.terminate) socket.terminate();
        else socket.close();
      } catch {
        // already closing
      }
    };
    const finish = (outcome: Transaction | undefined, error?: unknown) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (error !== undefined) reject(error);
      else resolve(outcome);
    };
    /** (Re)arms the deadline: the handshake's, then the liveness one after each sign of life. */
    const deadline = (ms: number) => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        drop();
        finish(undefined);
      }, ms);
    };
    const onAbort = () => {
      drop();
      finish(undefined, signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    deadline(handshakeMs);
    socket.addEventListener('open', () => !done && deadline(livenessMs));
    socket.on?.('ping', () => !done && deadline(livenessMs));
    socket.addEventListener('message', (event) => {
      if (done) return;
      deadline(livenessMs);
      let frame: { type?: string; transaction?: Transaction };
      try {
        frame = JSON.parse(text((event as { data?: unknown }).data));
      } catch {
        return;
      }
      if ((frame.type !== 'connected' && frame.type !== 'update') || !frame.transaction) return;
      try {
        report(frame.transaction);
      } catch (err) {
        // the caller's onUpdate threw: inside an event listener that would crash the process
        socket.close(1000);
        return finish(undefined, err);
      }
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
    /** A transaction's status, steps and result (docs/api.md#transactions). */
    get,
    /**
     * Resolves with the transaction once complete (`status` `finalized` or `failed`: check `status`), following
     * it over the WebSocket when the client has one, else (or when the socket cannot open, drops or falls silent)
     * by polling. Rejects with the signal's reason, with what `onUpdate` threw, or with a `WorksApiError` of REST.
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
        const settled = await overSocket(t, WebSocket, id, report, options);
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
