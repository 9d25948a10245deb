import http from 'node:http';
import https from 'node:https';
import { pinnedLookup, type VettedDestination } from './destination';

export interface DeliveryConnectionsOptions {
  /** WEBHOOK_KEEP_ALIVE_MS: how long an idle connection is kept for the next delivery; 0 = a fresh one each time. */
  readonly keepAliveMs: number;
  /**
   * WEBHOOK_CONCURRENCY: POSTs in flight at once in the process, whatever the number of jobs it holds (the
   * worker takes more jobs than this, so that some load and record while these POST); unlimited if absent.
   */
  readonly maxInFlight?: number;
}

/**
 * Kept-alive connections to webhook destinations, one agent per vetted destination: scheme, host name (the
 * TLS server name and certificate identity), port, and the exact set of addresses the host resolved to and
 * that passed the address policy. Each agent connects only to its own addresses (its pinned lookup overrides
 * any other), so a connection is reused only by a delivery whose fresh resolution vetted the same addresses:
 * when DNS answers differently, even with another allowed address, the delivery gets another agent and a new
 * connection to what it just vetted. Reusing a connection to an address vetted again is as safe as opening one.
 */
export class DeliveryConnections {
  private readonly agents = new Map<string, http.Agent>();
  private sweptAt = Date.now();
  private inFlight = 0;
  private readonly queued: (() => void)[] = [];

  constructor(private readonly options: DeliveryConnectionsOptions) {}

  /** The agent for this destination; `false` (a connection of its own, closed after) when keep-alive is off. */
  agentFor(destination: VettedDestination): http.Agent | false {
    if (this.options.keepAliveMs <= 0) return false;
    this.sweep();
    const key = destinationKey(destination);
    let agent = this.agents.get(key);
    if (!agent) {
      const options = {
        keepAlive: true,
        timeout: this.options.keepAliveMs,
        scheduling: 'lifo' as const,
        lookup: pinnedLookup(destination.addresses),
      };
      agent = destination.url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
      this.agents.set(key, agent);
    }
    return agent;
  }

  /**
   * Runs one exchange (a POST and its at-once resend) when fewer than `maxInFlight` are under way, else when
   * one ends, first come first served. (A counter and a queue: p-limit, the usual library, is ESM-only from
   * version 4; its 3.x line is CommonJS, and served here in a measurement that was not kept: docs/performance.md,
   * section 30.)
   */
  async withSlot<T>(exchange: () => Promise<T>): Promise<T> {
    if (this.inFlight >= (this.options.maxInFlight ?? Infinity)) await new Promise<void>((resolve) => this.queued.push(resolve));
    else this.inFlight += 1;
    try {
      return await exchange();
    } finally {
      // the slot passes straight to the next in line, so inFlight counts it still
      const next = this.queued.shift();
      if (next) next();
      else this.inFlight -= 1;
    }
  }

  /** Agents currently held (idle ones are dropped as deliveries come). */
  get size(): number {
    return this.agents.size;
  }

  destroy(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  /** Drops, at most once per keep-alive period, the agents whose connections have all closed. */
  private sweep(): void {
    const now = Date.now();
    if (now - this.sweptAt < this.options.keepAliveMs) return;
    this.sweptAt = now;
    for (const [key, agent] of this.agents) {
      const open = [agent.sockets, agent.freeSockets, agent.requests].some((byName) =>
        Object.values(byName).some((list) => list && list.length > 0),
      );
      if (!open) {
        agent.destroy();
        this.agents.delete(key);
      }
    }
  }
}

function destinationKey({ url, addresses }: VettedDestination): string {
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  const vetted = addresses
    .map((a) => `${a.family}/${a.address}`)
    .sort()
    .join(',');
  return `${url.protocol}//${url.hostname}:${port} ${vetted}`;
}
