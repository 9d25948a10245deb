/**
 * `read`, shared: whoever asks while a read runs gets that read, and for `maxAgeMs` after it ended, its result;
 * only then does the next ask read again. A read that failed is not kept. (Concurrent scrapes of the web's
 * `/metrics`, from several Prometheus servers say, cost one read of the state every `maxAgeMs` at most.)
 */
export function sharedRead<T>(read: () => Promise<T>, maxAgeMs: number, now: () => number = Date.now): () => Promise<T> {
  let last: { readonly promise: Promise<T>; endedAt?: number } | undefined;
  return () => {
    if (last && (last.endedAt === undefined || now() - last.endedAt < maxAgeMs)) return last.promise;
    const entry: { readonly promise: Promise<T>; endedAt?: number } = { promise: read() };
    entry.promise.then(
      () => (entry.endedAt = now()),
      () => {
        if (last === entry) last = undefined;
      },
    );
    last = entry;
    return entry.promise;
  };
}
