import { ApiPromise, WsProvider } from '@polkadot/api';
import type { ChainNetworkConfig, Network } from '../config';

export interface ChainHealth {
  readonly network: Network;
  readonly connected: boolean;
  readonly ready: boolean;
  readonly bestBlock?: number;
  readonly specName?: string;
  readonly error?: string;
}

/**
 * Owns one connection per configured network for the life of the process. The provider reconnects
 * on its own with backoff; nothing outside shared/chain sees an ApiPromise.
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
      this.apis.set(net.network, entry);
    }
  }

  has(network: Network): boolean {
    return this.apis.has(network);
  }

  /** The connected API once ready; waits (bounded) while the node is unreachable. */
  async api(network: Network, timeoutMs = 30_000): Promise<ApiPromise> {
    const entry = this.apis.get(network);
    if (!entry) throw new Error(`network ${network} is not configured`);
    await withTimeout(entry.api.isReadyOrError, timeoutMs, `chain ${network} not ready`);
    return entry.api;
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

  async close(): Promise<void> {
    await Promise.all([...this.apis.values()].map(({ api }) => api.disconnect().catch(() => undefined)));
    this.apis.clear();
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
