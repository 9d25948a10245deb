import type http from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../shared/logger';

/** Whether the web process is stopping: `/readyz` answers 503 from then on. */
export interface Lifecycle {
  readonly draining: boolean;
}

interface InFlight {
  readonly res: http.ServerResponse;
  /** Its place among the requests the process received: slots are reused, so their order is not this. */
  readonly arrival: number;
  readonly method: string;
  readonly path: string;
  readonly since: number;
  /** The connection it came on. */
  readonly connection: Socket;
  /** Whether its response waited on its connection behind another's when it arrived (HTTP pipelining). */
  readonly queued: boolean;
}

/**
 * The requests being answered, in slots of an array that a finished one empties for the next. Not a Map or a Set:
 * V8 rehashes their table into a new one whenever it fills and leaves the old table, entries and all, for the next
 * full collection (its source's `OrderedHashTable::Rehash`). A young collection takes the old-space table's records
 * of young entries as roots, dead table or not, so under a load whose requests wait on Redis nearly every response
 * was promoted and collected only by the major collections: the young collections' pauses came to 24 µs an init,
 * against 11 with the slots (docs/performance.md, section 53).
 */
class Slots<T> {
  private readonly slots: (T | undefined)[] = [];
  private readonly free: number[] = [];

  add(value: T): number {
    const slot = this.free.pop() ?? this.slots.length;
    this.slots[slot] = value;
    return slot;
  }

  /** Empties the slot if it still holds `value`: a second removal of the same value changes nothing. */
  remove(slot: number, value: T): void {
    if (this.slots[slot] !== value) return;
    this.slots[slot] = undefined;
    this.free.push(slot);
  }

  values(): T[] {
    return this.slots.filter((value): value is T => value !== undefined);
  }

  removeWhere(test: (value: T) => boolean): void {
    this.slots.forEach((value, slot) => {
      if (value !== undefined && test(value)) this.remove(slot, value);
    });
  }
}

/**
 * Stopping the HTTP server without cutting a request (README, *Processes*). `begin()` marks the process as
 * draining: `/readyz` answers 503 so a load balancer stops sending, and each connection's answer to the last
 * request received on it carries `Connection: close` (or, its headers already out, has its connection ended after
 * it once `close()` has begun), so kept-alive clients move to new connections while this one still accepts them.
 * `close()` then stops accepting and closes the idle connections (Node's `server.close()`); a request already
 * received is answered and its connection closed after it. At the deadline whatever is still unanswered is cut,
 * and named in the log.
 */
export class HttpDrain implements Lifecycle {
  draining = false;
  private server: http.Server | undefined;
  private readonly inFlight = new Slots<InFlight>();
  private arrivals = 0;
  /** Connections with a response queued on them that have their one 'close' listener. */
  private readonly queueing = new WeakSet<Socket>();
  /** While draining, each connection's last request received: a lookup, not a scan, whatever is in flight. */
  private readonly lastOn = new WeakMap<Socket, InFlight>();
  /** Responses this drain gave `Connection: close`. */
  private readonly closing = new WeakSet<http.ServerResponse>();
  /** Whether `close()` has begun: from then on a connection is ended after its last answer rather than left idle. */
  private stopping = false;

  constructor(private readonly log: Logger) {}

  /** Follows the server's requests; call once every other request listener is in place (engine.io wraps them). */
  watch(server: http.Server): void {
    this.server = server;
    server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      // A response queued behind another on its connection (HTTP pipelining) has no socket yet, and Node never
      // emits 'close' for it if the connection ends first: the connection's own 'close' frees what is queued on
      // it then, through one listener however many a client pipelines.
      const queued = !res.socket;
      const connection = req.socket;
      // the path alone: a query string may carry a session token
      const path = (req.url ?? '').split('?')[0]!;
      const entry: InFlight = {
        res,
        arrival: this.arrivals++,
        method: req.method ?? '',
        path,
        since: Date.now(),
        connection,
        queued,
      };
      const slot = this.inFlight.add(entry);
      res.once('close', () => this.inFlight.remove(slot, entry));
      if (queued && !this.queueing.has(connection)) {
        this.queueing.add(connection);
        connection.once('close', () => this.inFlight.removeWhere((e) => e.queued && e.connection === connection));
      }
      if (this.draining) this.endAfterLast(entry);
    });
  }

  begin(): void {
    this.draining = true;
    for (const entry of this.inFlight.values().sort((a, b) => a.arrival - b.arrival)) this.endAfterLast(entry);
  }

  /**
   * Makes `entry` the last request received on its connection, whose answer ends the connection: it says
   * `Connection: close` and Node ends the connection after it. The answer before it, to a request pipelined
   * ahead, loses the `Connection: close` this drain gave it while its headers are still to be written (Node drops
   * what is queued behind one). A last answer whose headers were already out promised keep-alive: once `close()`
   * has begun its connection is ended once it is answered (before that the connection is left idle, for
   * `close()` to end with the other idle ones, so that a client reusing it at once is answered rather than cut).
   * A request pipelined behind an answer whose headers already said `Connection: close` is Node's to drop, and
   * no drain can save it. Each connection's last is looked up, not searched for: its cost does not grow with
   * the requests in flight.
   */
  private endAfterLast(entry: InFlight): void {
    const { connection, res } = entry;
    const before = this.lastOn.get(connection);
    if (before && before.arrival > entry.arrival) return;
    this.lastOn.set(connection, entry);
    // the answer before it says nothing of closing, if it still can (a Connection header of the app's own stays)
    if (before && this.closing.has(before.res) && !before.res.headersSent && before.res.getHeader('Connection') === 'close') {
      before.res.removeHeader('Connection');
      this.closing.delete(before.res);
    }
    if (!res.headersSent) {
      if (res.getHeader('Connection') === undefined) {
        res.setHeader('Connection', 'close');
        this.closing.add(res);
      }
      return;
    }
    const end = () => {
      if (this.stopping && this.lastOn.get(connection) === entry) connection.destroySoon();
    };
    if (res.writableFinished) end();
    else res.once('finish', end);
  }

  /** Stops accepting; resolves once every connection has ended, or at `deadline` (ms since the epoch) after cutting the rest. */
  async close(deadline: number): Promise<void> {
    const server = this.server!;
    this.stopping = true;
    const closed = new Promise<'closed'>((resolve) => server.close(() => resolve('closed')));
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()), 'expired')));
    const outcome = await Promise.race([closed, expired]);
    clearTimeout(timer);
    if (outcome === 'closed') return;
    const now = Date.now();
    const cut = this.inFlight
      .values()
      .sort((a, b) => a.arrival - b.arrival)
      .map((r) => ({ method: r.method, path: r.path, elapsed_ms: now - r.since }));
    this.log.error({ requests: cut }, `shutdown: ${cut.length} request(s) still unanswered at the deadline, cut`);
    server.closeAllConnections();
  }
}
