import type { LookupAddress } from 'node:dns';
import { performance } from 'node:perf_hooks';
import { resolveAll, type Resolver } from './destination';

/** How long a webhook host's addresses are reused before the host is resolved again. */
export const HOST_ANSWER_MAX_AGE_MS = 30_000;

/** How long a lookup under way is joined by those asking for its host; past that, they start one of their own. */
export const HOST_LOOKUP_JOIN_MS = 5_000;

export interface ResolvedHostsOptions {
  /** The resolver asked (the system's, getaddrinfo, by default). */
  readonly lookup?: Resolver;
  readonly maxAgeMs?: number;
  readonly joinMs?: number;
  /**
   * Whether an answer may be reused: one the address policy refuses is not, so that a host answering a refused
   * address for a moment costs only the attempts of that moment (each attempt vets what it gets all the same).
   */
  readonly keep?: (addresses: readonly LookupAddress[]) => boolean;
  /** A monotonic clock in ms (tests give their own). */
  readonly now?: () => number;
}

interface Asking {
  readonly answer: Promise<LookupAddress[]>;
  readonly since: number;
}

/**
 * A worker process's answers for webhook hosts, each reused for up to `maxAgeMs`, and one lookup shared by the
 * deliveries that ask for a host while it is being resolved (a batch of 16 to one host made 16 lookups, each a
 * getaddrinfo on libuv's four threads and, past the machine's own cache, a round trip to its resolver).
 *
 * Every attempt still vets the addresses it is given (destination.ts) and connects only to them, so reusing an
 * answer never lets a delivery reach an address the policy refuses: a host that starts answering a refused
 * address is refused once its answer is renewed, at the latest `maxAgeMs` later, as it would be by an uncached
 * resolver whose system caches that long. Not kept: a failed lookup, an empty answer and (by `keep`) one the
 * policy refuses; the next attempt asks again. A lookup that does not end is joined for `joinMs` only.
 *
 * Why not `cacheable-lookup` (got's): it answers from c-ares' resolve4/resolve6 (for their TTLs) and falls back to
 * the system resolver only on failure, so /etc/hosts, nsswitch and search domains would apply otherwise than to an
 * uncached delivery; and its current major is ESM only. getaddrinfo gives no TTL, hence the fixed age, as the
 * JVM's default `networkaddress.cache.ttl` (30 s).
 */
export class ResolvedHosts {
  private readonly known = new Map<string, { readonly addresses: LookupAddress[]; readonly until: number }>();
  private readonly asking = new Map<string, Asking>();
  private readonly lookup: Resolver;
  private readonly maxAgeMs: number;
  private readonly joinMs: number;
  private readonly keep: (addresses: readonly LookupAddress[]) => boolean;
  private readonly now: () => number;
  private sweptAt: number;

  constructor(options: ResolvedHostsOptions = {}) {
    this.lookup = options.lookup ?? resolveAll;
    this.maxAgeMs = options.maxAgeMs ?? HOST_ANSWER_MAX_AGE_MS;
    this.joinMs = options.joinMs ?? HOST_LOOKUP_JOIN_MS;
    this.keep = options.keep ?? (() => true);
    this.now = options.now ?? (() => performance.now());
    this.sweptAt = this.now();
  }

  /** The host's addresses: the kept answer while it is young enough, else a lookup shared with those asking meanwhile. */
  readonly resolve: Resolver = (hostname) => {
    const now = this.now();
    this.sweep(now);
    const kept = this.known.get(hostname);
    if (kept && now < kept.until) return Promise.resolve(copy(kept.addresses));
    let asking = this.asking.get(hostname);
    if (!asking || now - asking.since >= this.joinMs) {
      const answer = this.lookup(hostname);
      const mine: Asking = { answer, since: now };
      const settled = () => {
        // a lookup that outlived its joining leaves the host to the one that replaced it
        if (this.asking.get(hostname) !== mine) return false;
        this.asking.delete(hostname);
        return true;
      };
      answer.then(
        (addresses) => {
          if (settled() && addresses.length > 0 && this.keep(addresses))
            this.known.set(hostname, { addresses: copy(addresses), until: this.now() + this.maxAgeMs });
        },
        () => void settled(),
      );
      this.asking.set(hostname, (asking = mine));
    }
    return asking.answer.then(copy);
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

const copy = (addresses: readonly LookupAddress[]): LookupAddress[] => addresses.map((a) => ({ ...a }));
