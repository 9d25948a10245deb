import { createHash } from 'node:crypto';
import type { Redis } from '../redis/client';
import { AppError } from '../errors';

interface StoredResponse {
  readonly state: 'in_flight' | 'done';
  readonly fingerprint: string;
  readonly status?: number;
  readonly body?: string;
}

export interface IdempotentResponse {
  readonly status: number;
  /** The exact bytes first sent. */
  readonly body: string;
}

/**
 * Idempotency-Key handling (docs/api.md#idempotency), scoped to the API key: the first response is replayed byte for
 * byte for the same body; another body answers 422 idempotency.key_reused; a request still running with
 * the key answers 409 idempotency.key_in_use. Failures are not remembered, so the caller may retry them.
 */
export class IdempotencyStore {
  /**
   * @param ttlSeconds how long a finished response is replayed (24 h by default)
   * @param claimSeconds how long an in-flight claim lasts: a process that dies mid-request frees its key then
   */
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly ttlSeconds: number,
    private readonly claimSeconds = 60,
  ) {}

  /** Of the request's meaning, not its spelling: the body as canonical JSON (keys sorted at every depth). */
  static fingerprint(method: string, path: string, body: unknown): string {
    return createHash('sha256')
      .update(`${method} ${path}\n${canonicalJson(body ?? null)}`)
      .digest('hex');
  }

  async run(apiKeyId: string, key: string, fingerprint: string, handler: () => Promise<IdempotentResponse>): Promise<IdempotentResponse> {
    const redisKey = `${this.prefix}:idem:${apiKeyId}:${createHash('sha256').update(key).digest('hex')}`;
    const claim: StoredResponse = { state: 'in_flight', fingerprint };
    const claimed = await this.redis.set(redisKey, JSON.stringify(claim), 'EX', Math.min(this.claimSeconds, this.ttlSeconds), 'NX');
    if (!claimed) {
      const existing = JSON.parse((await this.redis.get(redisKey)) ?? 'null') as StoredResponse | null;
      if (!existing) return this.run(apiKeyId, key, fingerprint, handler);
      if (existing.fingerprint !== fingerprint) {
        throw new AppError('idempotency.key_reused', 'This Idempotency-Key was used with a different request body');
      }
      if (existing.state === 'in_flight')
        throw new AppError('idempotency.key_in_use', 'A request with this Idempotency-Key is still being processed');
      return { status: existing.status!, body: existing.body! };
    }
    try {
      const response = await handler();
      const done: StoredResponse = { state: 'done', fingerprint, status: response.status, body: response.body };
      await this.redis.set(redisKey, JSON.stringify(done), 'EX', this.ttlSeconds);
      return response;
    } catch (err) {
      await this.redis.del(redisKey).catch(() => undefined);
      throw err;
    }
  }
}

/** JSON with every object's keys in code-point order, so the same value has one spelling. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}
