import type { Redis } from 'ioredis';
import { AppError } from '../errors';

/**
 * A token bucket per organization in Redis, shared by all its keys and all web processes (contract §9).
 * The script refills by elapsed time, then takes one token or says how long until one is available.
 */
const SCRIPT = `
local key = KEYS[1]
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', key, 'tokens', 'at')
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
redis.call('HSET', key, 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', key, math.ceil(burst * 1000 / rate) + 1000)
return { allowed, wait }
`;

export class OrganizationRateLimiter {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly perSecond: number,
    private readonly burst: number,
  ) {}

  async take(organizationId: string): Promise<void> {
    const [allowed, waitMs] = (await this.redis.eval(
      SCRIPT,
      1,
      `${this.prefix}:ratelimit:${organizationId}`,
      this.perSecond,
      this.burst,
    )) as [number, number];
    if (allowed === 1) return;
    const seconds = Math.max(1, Math.ceil(waitMs / 1000));
    throw new AppError('organization.rate_limited', `Too many uploads started; retry in ${seconds} s`, undefined, {
      'Retry-After': String(seconds),
    });
  }
}
