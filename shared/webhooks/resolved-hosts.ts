import type { LookupAddress } from 'node:dns';
import { resolveAll, type Resolver } from './destination';

/** How long a webhook host's addresses are reused before the host is resolved again. */
export const HOST_ANSWER_MAX_AGE_MS = 30_000;

/**
 * A worker process's answers for webhook hosts, each reused for up to `maxAgeMs`, and one lookup shared by the
 * deliveries that ask for a host while it is being resolved (a batch of 16 to one host made 16 lookups, each a
 * getaddrinfo on libuv's four threads and, past the machine's own cache, a round trip to its resolver).
 *
 * Every attempt still vets the addresses it is given (destination.ts) and connects only to them, so reusing an
 * answer never lets a delivery reach an address the policy refuses: a host that starts answering a forbidden
 * address is refused once its answer is renewed, at the latest `maxAgeMs` later, as it would be by an uncached
 * resolver whose system caches that long. A lookup that fails is not kept: the next attempt asks again.
 *
 * Why not `cacheable-lookup` (got's): it answers from c-ares' resolve4/resolve6 (for their TTLs) and falls back to
 * the system resolver only on failure, so /etc/hosts, nsswitch and search domains would apply otherwise than to an
 * uncached delivery; and its current major is ESM only. getaddrinfo gives no TTL, hence the fixed age, as the
 * JVM's default `networkaddress.cache.ttl` (30 s).
 */
export class ResolvedHosts {
  private readonly known = new Map<string, { readonly addresses: LookupAddress[]; readonly until: number }>();
  private readonly asking = new Map<string, Promise<LookupAddress[]>>();
  private sweptAt: number;

  constructor(
    private readonly lookup: Resolver = resolveAll,
    private readonly maxAgeMs = HOST_ANSWER_MAX_AGE_MS,
    private readonly now: () => number = Date.now,
  ) {
    this.sweptAt = now();
  }

  /** The host's addresses: the kept answer while it is young enough, else one lookup shared with those asking meanwhile. */
  readonly resolve: Resolver = (hostname) => {
    const now = this.now();
    this.sweep(now);
    const kept = this.known.get(hostname);
    if (kept && now < kept.until) return Promise.resolve(kept.addresses.map((a) => ({ ...a })));
    let asking = this.asking.get(hostname);
    if (!asking) {
      asking = this.lookup(hostname).then(
        (addresses) => {
          this.asking.delete(hostname);
          this.known.set(hostname, { addresses, until: this.now() + this.maxAgeMs });
          return addresses;
        },
        (err: unknown) => {
          this.asking.delete(hostname);
          throw err;
        },
      );
      this.asking.set(hostname, asking);
    }
    return asking.then((addresses) => addresses.map((a) => ({ ...a })));
  };

  /** Hosts whose answer is kept now (expired ones leave at the next sweep). */
  get size(): number {
    return this.known.size;
  }

  /** Drops, at most once per `maxAgeMs`, the answers that expired (hosts no delivery asks for any more). */
  private sweep(now: number): void {
    if (now - this.sweptAt < this.maxAgeMs) return;
    this.sweptAt = now;
    for (const [hostname, { until }] of this.known) if (until <= now) this.known.delete(hostname);
  }
}
