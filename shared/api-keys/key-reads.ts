import type { Knex } from 'knex';
import { findKeyByHash, type KeyLookup } from './repo';

/** How long a key check waits for another's PostgreSQL read of the same key before reading it itself. */
export const JOIN_WAIT_MS = 1_000;

/**
 * A web process's PostgreSQL reads of keys under way, by token hash. A key's requests that find no record in
 * Redis at the same moment (its first use; its record or its organization's status just expired) would each read
 * PostgreSQL and fill the same records; instead the first reads, and the others `join` its read: they wait for it
 * to settle (its records filled), at most `JOIN_WAIT_MS`, then ask Redis again themselves (key-cache.ts).
 *
 * A joiner never takes the read's answer as its own: that read may have begun before a suspension or a
 * revocation that answered before the joiner began. Asking Redis again afterwards finds what those wrote (they
 * write their records before answering, and a fill never overwrites a record: `SET NX`), as a read of its own
 * would while Redis keeps those records; when Redis still has no record (the fill failed, the read is slow or
 * failed, the key does not exist), the joiner reads PostgreSQL itself. A read that hangs holds its joiners
 * `JOIN_WAIT_MS` at most, and is no longer joined after that: the next check of its key starts a read of its own.
 */
export class KeyReads {
  private readonly underWay = new Map<string, Promise<unknown>>();

  constructor(private readonly find: (hash: Buffer) => Promise<KeyLookup | undefined>) {}

  /**
   * Reads the key and `fill`s its records with what was read. Other checks may join it until the fill settles or
   * `JOIN_WAIT_MS` has passed. If another read of this key is already under way, this one is the caller's alone:
   * nobody joins it.
   */
  async read(hash: Buffer, fill: (found: KeyLookup | undefined) => Promise<void>): Promise<KeyLookup | undefined> {
    const id = hash.toString('hex');
    const found = this.find(hash);
    const settled = found.then(fill);
    if (!this.underWay.has(id)) {
      this.underWay.set(id, settled);
      const done = () => {
        clearTimeout(stale);
        if (this.underWay.get(id) === settled) this.underWay.delete(id);
      };
      const stale = setTimeout(done, JOIN_WAIT_MS).unref();
      settled.then(done, done);
    }
    await settled.catch(() => undefined);
    return found;
  }

  /**
   * Waits for the read of this key under way to settle (at most `JOIN_WAIT_MS`); undefined, at once, when none is.
   * Not async: a caller that finds none starts its own `read` before any other check can look.
   */
  join(hash: Buffer): Promise<void> | undefined {
    const read = this.underWay.get(hash.toString('hex'));
    if (!read) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, JOIN_WAIT_MS)));
    return Promise.race([read.then(noop, noop), waited]).finally(() => clearTimeout(timer));
  }
}

const noop = () => undefined;

const perKnex = new WeakMap<Knex, KeyReads>();

/** The process's reads of keys through this Knex instance (a web process has one). */
export function keyReadsOf(db: Knex): KeyReads {
  let reads = perKnex.get(db);
  if (!reads) perKnex.set(db, (reads = new KeyReads((hash) => findKeyByHash(db, hash))));
  return reads;
}
