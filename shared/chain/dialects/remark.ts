import type { ApiPromise } from '@polkadot/api';
import type { ExpectedAnchors, RegistryDialect, VersionCheck } from '../dialect';
import { decodeAnchor, encodeSignedAnchor, verifyAnchorSignature } from '../remark-payload';

export interface CallLike {
  readonly section: string;
  readonly method: string;
  readonly args: readonly { toU8a(bare?: boolean): Uint8Array }[];
}

/** The remark bytes of a `system.remarkWithEvent` call, or of each such call inside a `utility` batch. */
export function remarksOf(call: CallLike): Buffer[] {
  if (call.section === 'system' && (call.method === 'remarkWithEvent' || call.method === 'remark'))
    return [Buffer.from(call.args[0]!.toU8a(true))];
  if (call.section === 'utility' && ['batch', 'batchAll', 'forceBatch'].includes(call.method)) {
    return (call.args[0] as unknown as CallLike[]).flatMap(remarksOf);
  }
  return [];
}

/**
 * Re-reads each version's extrinsic from the chain and checks, from the chain data alone, that its remark
 * is a works-api anchor carrying the indexed commitment, ats_id and version, made by the expected owner key,
 * with a valid owner signature bound to this chain's genesis hash.
 */
export async function verifyRemarkAnchors(api: ApiPromise, expected: ExpectedAnchors): Promise<VersionCheck[]> {
  const genesis = Buffer.from(api.genesisHash.toU8a());
  const checks: VersionCheck[] = [];
  for (const v of expected.versions) {
    const base = { version: v.version, block_hash: v.blockHash, tx_hash: v.txHash };
    const block = await api.rpc.chain.getBlock(v.blockHash).catch(() => undefined);
    const extrinsic = block?.block.extrinsics.find((x) => x.hash.toHex() === v.txHash);
    const remarks = extrinsic ? remarksOf(extrinsic.method as unknown as CallLike) : [];
    if (!remarks.length) {
      checks.push({
        ...base,
        found: false,
        commitment: false,
        ats_id: false,
        version_number: false,
        owner: false,
        signature: false,
        problem: 'no remark found in its extrinsic',
      });
      continue;
    }
    try {
      // A batch carries many anchors: this version's is the one naming its ats_id and version.
      const anchors = remarks.flatMap((bytes) => {
        try {
          return [decodeAnchor(bytes)];
        } catch {
          return [];
        }
      });
      const anchor =
        anchors.find((a) => Number(a.atsId) === expected.atsId && a.version === v.version) ?? anchors[0] ?? decodeAnchor(remarks[0]!);
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
      checks.push({
        ...base,
        found: true,
        commitment: false,
        ats_id: false,
        version_number: false,
        owner: false,
        signature: false,
        problem: (err as Error).message,
      });
    }
  }
  return checks;
}

/** Any Substrate chain: `system.remarkWithEvent` carrying the documented payload (docs/remark-anchor.md). */
export const remarkDialect: RegistryDialect = {
  name: 'remark',
  async buildCall(api, request) {
    const payload = encodeSignedAnchor(request, request.ownerSeed, Buffer.from(api.genesisHash.toU8a()));
    // hex, so the bytes are taken as the remark itself rather than as SCALE-encoded Bytes
    return api.tx.system.remarkWithEvent(`0x${payload.toString('hex')}`);
  },
  readAssignment: () => ({}),
  verify: verifyRemarkAnchors,
};
