import { ApiPromise, WsProvider } from '@polkadot/api';
import type { ChainNetworkConfig, Network } from '../config';
import { nativeDecimals, tokenAmount, type TokenAmount } from './tokens';
import { withTimeout } from '../timeout';

export interface ChainHealth {
  readonly network: Network;
  readonly connected: boolean;
  readonly ready: boolean;
  readonly bestBlock?: number;
  readonly specName?: string;
  readonly error?: string;
}

/** What the operators' metrics read of a network: the connection, both heads and an account's free balance. */
export interface ChainVitals {
  readonly network: Network;
  readonly connected: boolean;
  /** Absent when the node could not be read in time (or is not connected). */
  readonly bestBlock?: number;
  readonly finalizedBlock?: number;
  readonly free?: TokenAmount;
}

/**
 * Owns one connection per configured network for the life of the process. The provider reconnects on its
 * own (every 2 s) for as long as the node is away, including a node that was away when the process started;
 * nothing outside shared/chain sees an ApiPromise. A node that is away is an ordinary event: no error of the
 * socket, the provider or the API may reach no handler (a worker would die of it).
 */
export class ChainConnections {
  private readonly apis = new Map<Network, { api: ApiPromise; provider: WsProvider; ready: boolean }>();

  constructor(readonly networks: readonly ChainNetworkConfig[]) {
    for (const net of networks) {
      const provider = new WsProvider(net.wsUrl, 2000, {}, 10_000);
      const api = new ApiPromise({ provider, noInitWarn: true, throwOnConnect: false });
      const entry = { api, provider, ready: false };
      api.on('ready', () => (entry.ready = true));
      api.on('error', () => undefined);
      provider.on('error', () => undefined);
      // rejects (with the socket's ErrorEvent) when the first connection fails: handled here, waited on below
      api.isReadyOrError.catch(() => undefined);
      this.apis.set(net.network, entry);
    }
  }

  has(network: Network): boolean {
    return this.apis.has(network);
  }

  /**
   * The connected API once ready; waits (bounded) while the node is unreachable. `isReady` resolves whenever
   * the first connection succeeds, however late (`isReadyOrError` stays rejected after a failed first one).
   */
  async api(network: Network, timeoutMs = 30_000): Promise<ApiPromise> {
    const entry = this.apis.get(network);
    if (!entry) throw new Error(`network ${network} is not configured`);
    if (!entry.ready) await withTimeout(entry.api.isReady, timeoutMs, `chain ${network} not ready (the node is unreachable)`);
    return entry.api;
  }

  /** The connected API, as `api`, with its provider: a relayer batch's watch is asked of the provider (submit.ts). */
  async watchVia(network: Network): Promise<{ api: ApiPromise; provider: WsProvider }> {
    const api = await this.api(network);
    return { api, provider: this.apis.get(network)!.provider };
  }

  /** Resolves once the network's node has been reached (at once when it already has). */
  whenReady(network: Network): Promise<void> {
    const entry = this.apis.get(network);
    if (!entry) return Promise.reject(new Error(`network ${network} is not configured`));
    return entry.api.isReady.then(() => undefined);
  }

  async health(network: Network, timeoutMs = 3000): Promise<ChainHealth> {
    const entry = this.apis.get(network);
    if (!entry) return { network, connected: false, ready: false, error: 'not configured' };
    if (!entry.provider.isConnected || !entry.ready) {
      return { network, connected: entry.provider.isConnected, ready: entry.ready, error: 'not connected' };
    }
    try {
      const header = await withTimeout(entry.api.rpc.chain.getHeader(), timeoutMs, 'header request timed out');
      return {
        network,
        connected: true,
        ready: true,
        bestBlock: header.number.toNumber(),
        specName: entry.api.runtimeVersion.specName.toString(),
      };
    } catch (err) {
      return { network, connected: entry.provider.isConnected, ready: entry.ready, error: (err as Error).message };
    }
  }

  /** The network's vitals, with `account`'s free balance when given; bounded by `timeoutMs`, never throws. */
  async vitals(network: Network, account: string | undefined, timeoutMs = 3000): Promise<ChainVitals> {
    const entry = this.apis.get(network);
    const connected = Boolean(entry?.provider.isConnected && entry.ready);
    if (!entry || !connected) return { network, connected };
    const { api } = entry;
    try {
      const read = async () => {
        const [best, finalizedHash, info] = await Promise.all([
          api.rpc.chain.getHeader(),
          api.rpc.chain.getFinalizedHead(),
          account === undefined
            ? undefined
            : (api.query.system.account(account) as unknown as Promise<{ data: { free: { toString(): string } } }>),
        ]);
        const finalized = await api.rpc.chain.getHeader(finalizedHash);
        return {
          bestBlock: best.number.toNumber(),
          finalizedBlock: finalized.number.toNumber(),
          ...(info && { free: tokenAmount(BigInt(info.data.free.toString()), nativeDecimals(api)) }),
        };
      };
      return { network, connected, ...(await withTimeout(read(), timeoutMs, 'vitals request timed out')) };
    } catch {
      return { network, connected: entry.provider.isConnected && entry.ready };
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.apis.values()].map(({ api }) => api.disconnect().catch(() => undefined)));
    this.apis.clear();
  }
}
