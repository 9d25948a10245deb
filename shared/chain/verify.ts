import { decodeAddress } from '@polkadot/util-crypto';
import type { Network } from '../config';
import type { ChainConnections } from './connections';
import { decodeAnchor, verifyAnchorSignature } from './remark-payload';
import { chooseDialect, type ItemEvent } from './dialect';
import { decodeAtsEvent } from './ats';

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
  if (chooseDialect(api).name === 'ats') return verifyAtsAnchors(chains, network, expected);
  const genesis = Buffer.from(api.genesisHash.toU8a());
  const checks: VersionCheck[] = [];
  for (const v of expected.versions) {
    const base = { version: v.version, block_hash: v.blockHash, tx_hash: v.txHash };
    const block = await api.rpc.chain.getBlock(v.blockHash).catch(() => undefined);
    const extrinsic = block?.block.extrinsics.find((x) => x.hash.toHex() === v.txHash);
    const remarks = extrinsic ? remarksOf(extrinsic.method as unknown as CallLike) : [];
    if (!remarks.length) {
      checks.push({ ...base, found: false, commitment: false, ats_id: false, version_number: false, owner: false, signature: false, problem: 'no remark found in its extrinsic' });
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
      const anchor = anchors.find((a) => Number(a.atsId) === expected.atsId && a.version === v.version) ?? anchors[0] ?? decodeAnchor(remarks[0]!);
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

/**
 * The `ats` dialect's check, from the chain data alone: each version's block holds the pallet's
 * `AtsCreated` (version 1) or `AtsUpdated` (chain version = API version − 1) for this `ats_id`, with the
 * indexed commitment; the owner is the one `AtsCreated` names (an update is the pallet's only if the
 * owner's signature over its nonce was accepted, so an event is the signature's proof).
 */
async function verifyAtsAnchors(chains: ChainConnections, network: Network, expected: { atsId: number; ownerPublicKey: string; versions: readonly IndexedVersion[] }): Promise<VersionCheck[]> {
  const api = await chains.api(network);
  const eventsOf = async (blockHash: string): Promise<ItemEvent[] | undefined> => {
    const at = await api.at(blockHash).catch(() => undefined);
    if (!at) return undefined;
    const records = (await at.query.system.events()) as unknown as { event: { section: string; method: string; data: { toJSON(): unknown } } }[];
    return records.map((r) => ({ section: r.event.section, method: r.event.method, data: r.event.data.toJSON() }));
  };
  const checks: VersionCheck[] = [];
  for (const v of expected.versions) checks.push(checkAtsVersion(await eventsOf(v.blockHash), expected, v));
  return checks;
}

/** One version's check against the events of its block (undefined: the block is not on this chain). */
export function checkAtsVersion(events: readonly ItemEvent[] | undefined, expected: { atsId: number; ownerPublicKey: string }, v: IndexedVersion): VersionCheck {
  const base = { version: v.version, block_hash: v.blockHash, tx_hash: v.txHash };
  const none = { found: false, commitment: false, ats_id: false, version_number: false, owner: false, signature: false };
  if (!events) return { ...base, ...none, problem: 'its block is not on this chain' };
  const mine = events.filter((e) => {
    const a = decodeAtsEvent(e);
    return a !== undefined && a.atsId === BigInt(expected.atsId) && a.version === v.version;
  });
  const event = mine[0];
  if (!event) return { ...base, ...none, problem: `no ats.${v.version === 1 ? 'AtsCreated' : 'AtsUpdated'} for this ats_id and version in its block` };
  const data = event.data as Record<string, unknown> | unknown[];
  const field = (name: string, index: number) => (Array.isArray(data) ? data[index] : (data as Record<string, unknown>)[name]);
  const commitment = String(field('commitment', 2)).toLowerCase(); // third in both events
  const owner = event.method === 'AtsCreated' ? String(field('owner', 1)) : undefined;
  return {
    ...base,
    found: true,
    commitment: commitment === v.commitment.toLowerCase(),
    ats_id: true,
    version_number: true,
    // an update names no owner: the creation's (checked as version 1) is the work's
    owner: owner === undefined ? true : sameAccount(owner, expected.ownerPublicKey),
    signature: true,
  };
}

/** An account from an event (hex public key, or ss58) against a 0x public key. */
function sameAccount(account: string, publicKeyHex: string): boolean {
  if (/^0x[0-9a-f]{64}$/i.test(account)) return account.toLowerCase() === publicKeyHex.toLowerCase();
  try {
    return `0x${Buffer.from(decodeAddress(account)).toString('hex')}` === publicKeyHex.toLowerCase();
  } catch {
    return false;
  }
}

export interface CallLike {
  readonly section: string;
  readonly method: string;
  readonly args: readonly { toU8a(bare?: boolean): Uint8Array }[];
}

/** The remark bytes of a `system.remarkWithEvent` call, or of each such call inside a `utility` batch. */
export function remarksOf(call: CallLike): Buffer[] {
  if (call.section === 'system' && (call.method === 'remarkWithEvent' || call.method === 'remark')) return [Buffer.from(call.args[0]!.toU8a(true))];
  if (call.section === 'utility' && ['batch', 'batchAll', 'forceBatch'].includes(call.method)) {
    return (call.args[0] as unknown as CallLike[]).flatMap(remarksOf);
  }
  return [];
}

export const versionIsValid = (c: VersionCheck) => c.found && c.commitment && c.ats_id && c.version_number && c.owner && c.signature;
