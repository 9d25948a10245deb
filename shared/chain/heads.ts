import type { ApiPromise } from '@polkadot/api';

type HeadSubscription = (api: ApiPromise, onHead: (header: { number: { toNumber(): number } }) => void) => Promise<() => void>;

export type Head = 'best' | 'finalized';

/** One `HeightWatch` per network and head, made when first waited on; every waiter of it shares its subscription. */
export class HeadWatches {
  private readonly watches = new Map<string, HeightWatch>();

  of(api: ApiPromise, network: string, head: Head): HeightWatch {
    const key = `${network}:${head}`;
    let watch = this.watches.get(key);
    if (!watch) {
      watch =
        head === 'finalized'
          ? new HeightWatch(api, (a, onHead) => a.rpc.chain.subscribeFinalizedHeads(onHead), 'finality')
          : new HeightWatch(api, (a, onHead) => a.rpc.chain.subscribeNewHeads(onHead), 'a new block');
      this.watches.set(key, watch);
    }
    return watch;
  }
}

/** Waits until the block is finalized; true when it is still the canonical block at its height. */
export async function waitFinalized(
  api: ApiPromise,
  watch: HeightWatch,
  blockNumber: number,
  blockHash: string,
  timeoutMs: number,
): Promise<boolean> {
  await watch.reached(blockNumber, timeoutMs);
  return (await api.rpc.chain.getBlockHash(blockNumber)).toHex() === blockHash;
}

export async function bestBlockNumber(api: ApiPromise): Promise<number> {
  return (await api.rpc.chain.getHeader()).number.toNumber();
}

/** The finalized head's height and hash. */
export async function finalizedHead(api: ApiPromise): Promise<{ number: number; hash: string }> {
  const hash = await api.rpc.chain.getFinalizedHead();
  return { number: (await api.rpc.chain.getHeader(hash)).number.toNumber(), hash: hash.toHex() };
}

export async function finalizedBlockNumber(api: ApiPromise): Promise<number> {
  return (await finalizedHead(api)).number;
}

/** The canonical block's hash at a height, or undefined past the best block. */
export async function blockHashAt(api: ApiPromise, height: number): Promise<string | undefined> {
  if (height > (await bestBlockNumber(api))) return undefined;
  return (await api.rpc.chain.getBlockHash(height)).toHex();
}

/** Waiters for heights of a head (best or finalized) over one subscription, opened while someone waits. */
export class HeightWatch {
  private height = -1;
  private readonly waiters = new Set<{ height: number; resolve: () => void }>();
  private subscription: Promise<() => void> | undefined;

  constructor(
    private readonly api: ApiPromise,
    private readonly heads: HeadSubscription,
    private readonly what: string,
  ) {}

  /** Resolves once the head is at `height` or past it; rejects after `timeoutMs`, or once `signal` aborts. */
  async reached(height: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (height <= this.height) return;
    signal?.throwIfAborted();
    const waiter = { height, resolve: () => {} };
    const reached = new Promise<void>((resolve) => (waiter.resolve = resolve));
    this.waiters.add(waiter);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>(
      (_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${this.what}`)), timeoutMs)),
    );
    let onAbort: (() => void) | undefined;
    const given = signal && new Promise<never>((_, reject) => signal.addEventListener('abort', (onAbort = () => reject(signal.reason))));
    try {
      // a subscription that cannot be made fails its waiters (the job retries later)
      await Promise.race([reached, timedOut, this.subscribe().then(() => reached), ...(given ? [given] : [])]);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
      this.waiters.delete(waiter);
      if (!this.waiters.size) this.unsubscribe();
    }
  }

  private subscribe(): Promise<() => void> {
    if (!this.subscription) {
      const subscription = this.heads(this.api, (header) => {
        this.height = Math.max(this.height, header.number.toNumber());
        for (const waiter of this.waiters) if (waiter.height <= this.height) waiter.resolve();
      });
      subscription.catch(() => {
        if (this.subscription === subscription) this.subscription = undefined;
      });
      this.subscription = subscription;
    }
    return this.subscription;
  }

  private unsubscribe(): void {
    const subscription = this.subscription;
    this.subscription = undefined;
    void subscription?.then((stop) => stop()).catch(() => undefined);
  }
}
