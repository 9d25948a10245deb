import type { Redis } from 'ioredis';
import type { PreparedQuote, UploadSession } from './types';

/**
 * Upload sessions and prepared quotes live in Redis with native TTLs. Keys carry the organization, so one
 * organization can neither read nor consume another's job, whatever job id it sends.
 */
export class RegistrationStore {
  constructor(private readonly redis: Redis, private readonly prefix: string) {}

  private sessionKey = (org: string, job: string) => `${this.prefix}:upload:${org}:${job}`;
  private quoteKey = (org: string, job: string) => `${this.prefix}:quote:${org}:${job}`;

  async saveSession(session: UploadSession, ttlSeconds: number): Promise<void> {
    await this.redis.set(this.sessionKey(session.organizationId, session.jobId), JSON.stringify(session), 'EX', ttlSeconds);
  }

  async session(organizationId: string, jobId: string): Promise<UploadSession | undefined> {
    const raw = await this.redis.get(this.sessionKey(organizationId, jobId));
    return raw ? (JSON.parse(raw) as UploadSession) : undefined;
  }

  async saveQuote(quote: PreparedQuote): Promise<void> {
    await this.putQuote(quote, false);
  }

  /** Atomically takes the quote: of any number of concurrent confirms, exactly one gets it. */
  async consumeQuote(organizationId: string, jobId: string): Promise<PreparedQuote | undefined> {
    const raw = await this.redis.getdel(this.quoteKey(organizationId, jobId));
    return raw ? (JSON.parse(raw) as PreparedQuote) : undefined;
  }

  /** Puts back a quote whose confirm could not complete, for its remaining lifetime only. */
  async restoreQuote(quote: PreparedQuote): Promise<void> {
    await this.putQuote(quote, true);
  }

  /** Stores a quote for what remains of its lifetime; `onlyIfAbsent` never overwrites a newer one. */
  private async putQuote(quote: PreparedQuote, onlyIfAbsent: boolean): Promise<void> {
    const ttlMs = new Date(quote.expiresAt).getTime() - Date.now();
    if (ttlMs <= 0) return;
    const key = this.quoteKey(quote.session.organizationId, quote.session.jobId);
    if (onlyIfAbsent) await this.redis.set(key, JSON.stringify(quote), 'PX', ttlMs, 'NX');
    else await this.redis.set(key, JSON.stringify(quote), 'PX', ttlMs);
  }
}
