import type { Network } from '../config';
import type { ChainConnections } from './connections';
import { decodeAnchor, verifyAnchorSignature } from './remark-payload';

export interface IndexedVersion {
  readonly version: number;
  readonly commitment: string;
  readonly blockHash: string;
  readonly txHash: string;
}

export interface VersionCheck {
  readonly version: number;
  readonly block_hash: string;
  readonly tx_hash: string;
  readonly found: boolean;
  readonly commitment: boolean;
  readonly ats_id: boolean;
  readonly version_number: boolean;
  readonly owner: boolean;
  readonly signature: boolean;
  readonly problem?: string;
}

/**
 * Re-reads each version's extrinsic from the chain and checks, from the chain data alone, that its remark
 * is a works-api anchor carrying the indexed commitment, ats_id and version, made by the expected owner key,
 * with a valid owner signature bound to this chain's genesis hash.
 */
export async function verifyAnchors(
  chains: ChainConnections,
  network: Network,
  expected: { atsId: number; ownerPublicKey: string; versions: readonly IndexedVersion[] },
): Promise<VersionCheck[]> {
  const api = await chains.api(network);
  const genesis = Buffer.from(api.genesisHash.toU8a());
  const checks: VersionCheck[] = [];
  for (const v of expected.versions) {
    const base = { version: v.version, block_hash: v.blockHash, tx_hash: v.txHash };
    const block = await api.rpc.chain.getBlock(v.blockHash).catch(() => undefined);
    const extrinsic = block?.block.extrinsics.find((x) => x.hash.toHex() === v.txHash);
    if (!extrinsic || `${extrinsic.method.section}.${extrinsic.method.method}` !== 'system.remarkWithEvent') {
      checks.push({ ...base, found: false, commitment: false, ats_id: false, version_number: false, owner: false, signature: false, problem: 'extrinsic not found in its block' });
      continue;
    }
    try {
      const anchor = decodeAnchor(Buffer.from(extrinsic.method.args[0]!.toU8a(true)));
      checks.push({
        ...base,
        found: true,
        commitment: `0x${anchor.commitment.toString('hex')}` === v.commitment,
        ats_id: Number(anchor.atsId) === expected.atsId,
        version_number: anchor.version === v.version,
        owner: `0x${anchor.ownerPublicKey.toString('hex')}` === expected.ownerPublicKey,
        signature: verifyAnchorSignature(anchor, genesis),
      });
    } catch (err) {
      checks.push({ ...base, found: true, commitment: false, ats_id: false, version_number: false, owner: false, signature: false, problem: (err as Error).message });
    }
  }
  return checks;
}

export const versionIsValid = (c: VersionCheck) => c.found && c.commitment && c.ats_id && c.version_number && c.owner && c.signature;
