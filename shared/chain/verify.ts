import type { Network } from '../config';
import type { ChainConnections } from './connections';
import { chooseDialect } from './choose-dialect';
import type { ExpectedAnchors, VersionCheck } from './dialect';

export type { IndexedVersion, VersionCheck } from './dialect';
export { remarksOf, type CallLike } from './dialects/remark';
export { checkAtsVersion } from './dialects/ats';

/** Checks each indexed version against the chain data alone, in the dialect of the network's runtime. */
export async function verifyAnchors(chains: ChainConnections, network: Network, expected: ExpectedAnchors): Promise<VersionCheck[]> {
  const api = await chains.api(network);
  return chooseDialect(api).verify(api, expected);
}

export const versionIsValid = (c: VersionCheck) => c.found && c.commitment && c.ats_id && c.version_number && c.owner && c.signature;
