import { AppError } from '../../shared/errors';
import type { Config } from '../../shared/config';

/** A live socket as the process-wide sweep sees it. */
export interface LiveConnection {
  /** Called every heartbeat period: drop a peer that missed the last ping, ping, close when idle. */
  tick(now: number): void;
  /** Ends the connection because the process is stopping. */
  shutdown(): void;
}

/**
 * Every live socket of this web process (plain WebSocket and socket.io alike): the per-organization cap and
 * one timer for heartbeats and idle checks, rather than timers per socket.
 */
export class LiveConnections {
  private readonly open = new Set<LiveConnection>();
  private readonly perOrg = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly limits: Config['live']) {
    this.timer = setInterval(() => this.sweep(), limits.heartbeatSeconds * 1000);
    this.timer.unref();
  }

  /**
   * Takes one of the organization's places, or answers 429 when they are all taken. The returned function
   * gives it back (once, however often it is called).
   */
  reserve(organizationId: string): () => void {
    const count = this.perOrg.get(organizationId) ?? 0;
    if (count >= this.limits.maxSocketsPerOrg) {
      throw new AppError(
        'organization.rate_limited',
        `At most ${this.limits.maxSocketsPerOrg} live connections per organization`,
        undefined,
        { 'Retry-After': '30' },
      );
    }
    this.perOrg.set(organizationId, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.perOrg.get(organizationId) ?? 1) - 1;
      if (left > 0) this.perOrg.set(organizationId, left);
      else this.perOrg.delete(organizationId);
    };
  }

  add(connection: LiveConnection): void {
    this.open.add(connection);
  }

  delete(connection: LiveConnection): void {
    this.open.delete(connection);
  }

  get size(): number {
    return this.open.size;
  }

  /** Stops the sweep and ends every connection. */
  shutdown(): void {
    clearInterval(this.timer);
    for (const connection of [...this.open]) connection.shutdown();
  }

  private sweep(): void {
    const now = Date.now();
    for (const connection of [...this.open]) connection.tick(now);
  }
}
