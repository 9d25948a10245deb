import { expect } from 'chai';
import { evictionOf } from '../../shared/redis/eviction';

/** `INFO memory` as a server writes it (CRLF, a header line, the fields the check reads among others). */
const info = (fields: Record<string, string>) =>
  ['# Memory', 'used_memory:1032456', ...Object.entries(fields).map(([k, v]) => `${k}:${v}`), 'mem_allocator:jemalloc-5.3.0', ''].join(
    '\r\n',
  );

describe('Redis eviction: the verdict on a server’s INFO memory', () => {
  it('keeps keys under noeviction, whatever maxmemory is', () => {
    expect(evictionOf(info({ maxmemory: '1073741824', maxmemory_policy: 'noeviction' }))).to.deep.equal({
      policy: 'noeviction',
      maxmemory: 1073741824,
      evicts: false,
    });
  });

  it('keeps keys with no maxmemory, whatever the policy (Redis evicts only under a limit)', () => {
    expect(evictionOf(info({ maxmemory: '0', maxmemory_policy: 'allkeys-lru' })).evicts).to.equal(false);
  });

  for (const policy of ['allkeys-lru', 'allkeys-lfu', 'allkeys-random', 'volatile-lru', 'volatile-lfu', 'volatile-random', 'volatile-ttl'])
    it(`may evict under ${policy} with a maxmemory (every record the service keeps has a TTL, so volatile-* counts too)`, () => {
      expect(evictionOf(info({ maxmemory: '268435456', maxmemory_policy: policy }))).to.deep.equal({
        policy,
        maxmemory: 268435456,
        evicts: true,
      });
    });

  it('may evict under a policy it does not know, rather than guess it keeps keys', () => {
    expect(evictionOf(info({ maxmemory: '1', maxmemory_policy: 'some-future-policy' })).evicts).to.equal(true);
  });

  it('cannot tell when the server does not report its policy (a managed Redis that hides it)', () => {
    expect(evictionOf(info({ maxmemory: '1073741824' }))).to.deep.equal({ policy: undefined, maxmemory: 1073741824, evicts: undefined });
    expect(evictionOf('')).to.deep.equal({ policy: undefined, maxmemory: undefined, evicts: undefined });
  });

  it('reads a field only at the start of its own line (LF or CRLF), not inside another', () => {
    const text = 'x_maxmemory_policy:noeviction\nmaxmemory_policy:allkeys-lru\nmaxmemory:5\n';
    expect(evictionOf(text)).to.deep.equal({ policy: 'allkeys-lru', maxmemory: 5, evicts: true });
  });
});
