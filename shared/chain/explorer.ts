/*
 * Explorer links, in one place: config.ts takes each network's template from here (unless EXPLORER_URL_<NET>
 * sets it), and every link the service hands out (a transaction's result, a webhook's payload, a certificate's
 * text and QR code) is made by explorerUrl. No import of config.ts: it imports this.
 */

/** Production's templates: Allfeat's public explorer. */
export const ALLFEAT_EXPLORER = {
  testnet: 'https://explorer.allfeat.org/extrinsics/{block}-{index}?network=melodie',
  mainnet: 'https://explorer.allfeat.org/extrinsics/{block}-{index}',
} as const;

/**
 * A network's template when EXPLORER_URL_<NET> is unset. In production, Allfeat's explorer. Elsewhere, where the
 * chain is mostly the embedded chopsticks one of `npm run dev` and the tests, which no public explorer knows:
 * polkadot.js apps connected to the node this service uses (`?rpc=`), on the block's page
 * (`#/explorer/query/<number or hash>`). The node's user part, query and fragment stay out: a link is no place
 * for a credential.
 */
export function defaultExplorerTemplate(production: boolean, network: keyof typeof ALLFEAT_EXPLORER, wsUrl: string): string {
  if (production || !URL.canParse(wsUrl)) return ALLFEAT_EXPLORER[network];
  const node = new URL(wsUrl);
  const rpc = `${node.protocol}//${node.host}${node.pathname === '/' ? '' : node.pathname}`;
  return `https://polkadot.js.org/apps/?rpc=${encodeURIComponent(rpc)}#/explorer/query/{block}`;
}

/** Where a call landed: its block's number and its extrinsic's index in that block. */
export interface CallPosition {
  readonly blockNumber: number;
  readonly index: number;
}

/** The explorer link of a call: its network's template with `{block}` and `{index}` filled in. */
export function explorerUrl(
  chains: readonly { readonly network: string; readonly explorerUrlTemplate: string }[],
  network: string,
  at: CallPosition,
): string {
  const template = chains.find((c) => c.network === network)?.explorerUrlTemplate ?? '';
  return template.replaceAll('{block}', String(at.blockNumber)).replaceAll('{index}', String(at.index));
}
