import type { ApiPromise } from '@polkadot/api';
import { compactToU8a, u8aConcat, u8aToHex } from '@polkadot/util';
import type { ExpectedAnchors, RegistryDialect, VersionCheck } from '../dialect';
import { decodeAnchor, encodeSignedAnchor, encodeUnsignedAnchor, verifyAnchorSignature } from '../remark-payload';

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

/**
 * `system.remarkWithEvent(remark)`, SCALE-encoded: the call's index, then the remark as `Bytes` (its length as a
 * compact, then the bytes). Encoded here rather than through the API's extrinsic builder, which made a whole
 * unsigned extrinsic for each call to read its call back (about 0.1 ms; this takes 0.01). A runtime whose
 * `remarkWithEvent` takes anything else has its calls built by the API (`test/integration/batching.test.ts`
 * holds the two equal).
 */
export function remarkCall(api: ApiPromise, remark: Uint8Array): string {
  const build = api.tx.system.remarkWithEvent;
  const args = build.meta.args;
  if (args.length !== 1 || args[0]!.type.toString() !== 'Bytes') return build(u8aToHex(remark)).method.toHex();
  return u8aToHex(u8aConcat(build.callIndex, compactToU8a(remark.length), remark));
}

/** Any Substrate chain: `system.remarkWithEvent` carrying the documented payload (docs/remark-anchor.md). */
export const remarkDialect: RegistryDialect = {
  name: 'remark',
  async buildCall(api, request) {
    return remarkCall(api, encodeSignedAnchor(request, request.ownerSeed, Buffer.from(api.genesisHash.toU8a())));
  },
  // the chain reads nothing of the remark: its fee and dry run are those of any remark of its length
  quoteCall: (api, request) => remarkCall(api, encodeUnsignedAnchor(request)),
  readAssignment: () => ({}),
  verify: verifyRemarkAnchors,
};
