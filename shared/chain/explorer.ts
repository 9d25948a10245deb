/*
 * Explorer links, in one place: config.ts takes each network's template from here (unless EXPLORER_URL_<NET>
 * sets it), and every link the service hands out (a transaction's result, a webhook's payload, a certificate's
 * text and QR code) is made by explorerUrl. No import of config.ts: it imports this.
 */

/** Production's templates: Allfeat's public explorer. */
const ALLFEAT_EXPLORER = {
  testnet: 'https://explorer.allfeat.org/extrinsics/{block}-{index}?network=melodie',
  mainnet: 'https://explorer.allfeat.org/extrinsics/{block}-{index}',
} as const;

/**
 * A network's template when EXPLORER_URL_<NET> is unset: Allfeat's explorer, except for a chain on this very
 * machine outside production (the embedded chopsticks chain of `npm run dev` and the tests, which no public
 * explorer knows): there, polkadot.js apps connected to that node (`?rpc=`), on the block's page
 * (`#/explorer/query/<number or hash>`). Only a loopback node is ever named in a link: a link is stored, sent in
 * webhooks and printed on certificates for good, and a remote node's URL may hold a provider's key (in its path
 * as much as in its user part or query), so a deployment that forgot NODE_ENV=production still links to Allfeat.
 */
export function defaultExplorerTemplate(production: boolean, network: keyof typeof ALLFEAT_EXPLORER, wsUrl: string): string {
  const node = URL.canParse(wsUrl) ? new URL(wsUrl) : undefined;
  if (production || !node || !LOOPBACK.has(node.hostname) || node.username || node.password) return ALLFEAT_EXPLORER[network];
  const rpc = `${node.protocol}//${node.host}${node.pathname === '/' ? '' : node.pathname}`;
  return `https://polkadot.js.org/apps/?rpc=${encodeURIComponent(rpc)}#/explorer/query/{block}`;
}

/** The host names of this machine a URL can name (127.0.0.0/8 as its usual 127.0.0.1). */
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

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
