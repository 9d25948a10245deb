import type { ChainNetworkConfig, Network } from '../config';

/** Where a call landed: its block's number and its extrinsic's index in that block. */
export interface CallPosition {
  readonly blockNumber: number;
  readonly index: number;
}

/**
 * The explorer link of a call, from its network's template (config.ts decides the template: EXPLORER_URL_<NET>,
 * Allfeat's explorer in production, the node itself in polkadot.js apps elsewhere). Every link the service hands
 * out (a transaction's result, a webhook's payload, a certificate's text and QR code) is made here.
 */
export function explorerUrl(chains: readonly ChainNetworkConfig[], network: Network, at: CallPosition): string {
  const template = chains.find((c) => c.network === network)?.explorerUrlTemplate ?? '';
  return template.replaceAll('{block}', String(at.blockNumber)).replaceAll('{index}', String(at.index));
}
