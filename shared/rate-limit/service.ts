import type { Redis } from '../redis/client';
import { AppError } from '../errors';

/**
 * A token bucket per organization in Redis, shared by all its keys and all web processes (docs/api.md#rate-limits).
 * The script refills by elapsed time, then takes one token or says how long until one is available. It is
 * also run inside the key check of rate-limited routes (api-keys/key-cache.ts), saving a round trip.
 *
 * The Lua below expects `bucket` (the key), `rate` and `burst` set, and sets `allowed` and `wait`.
 */
export const TAKE_TOKEN_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', bucket, 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + (now - at) * rate / 1000)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', bucket, 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', bucket, math.ceil(burst * 1000 / rate) + 1000)
`;

const SCRIPT = `
local bucket = KEYS[1]
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
${TAKE_TOKEN_LUA}
return { allowed, wait }
`;

export const bucketKey = (prefix: string, organizationId: string) => `${prefix}:ratelimit:${organizationId}`;

/** The refusal of a request the bucket had no token for (`waitMs` until one is available). */
export function rateLimited(waitMs: number): AppError {
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  return new AppError('organization.rate_limited', `Too many uploads started; retry in ${seconds} s`, undefined, {
    'Retry-After': String(seconds),
  });
}

export class OrganizationRateLimiter {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    readonly perSecond: number,
    readonly burst: number,
  ) {}

  async take(organizationId: string): Promise<void> {
    const [allowed, waitMs] = (await this.redis.eval(SCRIPT, 1, bucketKey(this.prefix, organizationId), this.perSecond, this.burst)) as [
      number,
      number,
    ];
    if (allowed !== 1) throw rateLimited(waitMs);
  }
}
