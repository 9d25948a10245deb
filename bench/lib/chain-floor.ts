import { randomBytes } from 'node:crypto';
import type { ApiPromise } from '@polkadot/api';
import { remarkDialect } from '../../shared/chain/dialects/remark';

export interface ChainCapacity {
  /** Calls like this one the runtime lets into one block: its normal-class weight (ref time and proof size) and length. */
  readonly callsPerBlock: number;
  readonly boundBy: 'ref_time' | 'proof_size' | 'length';
  readonly perCall: { readonly refTime: number; readonly proofSize: number; readonly length: number };
  readonly block: { readonly refTime: number; readonly proofSize: number; readonly length: number };
  /** The runtime's own cap on one utility batch. */
  readonly batchedCallsLimit: number | null;
}

/**
 * The pipeline bench's floor: how many anchor calls the chain itself can take per block, from the runtime's
 * limits (not the service's CHAIN_BATCH_MAX or its share of a block): the marginal weight and length of one
 * more call in a relayer batch, against the normal dispatch class's block weight and length. Extrinsics may
 * share a block, so the per-extrinsic limit does not bound it.
 */
export async function chainCapacity(chain: ApiPromise, callHex: string, relayer: string): Promise<ChainCapacity> {
  const api = chain as any;
  const batch = (n: number) => {
    const calls = Array.from({ length: n }, () => api.createType('Call', callHex));
    return api.tx.utility.forceBatch ? api.tx.utility.forceBatch(calls) : api.tx.utility.batch(calls);
  };
  const weigh = async (n: number) => {
    const tx = batch(n);
    const info = await tx.paymentInfo(relayer);
    return { ...weight(info.weight.toJSON()), length: tx.encodedLength };
  };
  const [one, many] = [await weigh(1), await weigh(11)];
  const perCall = {
    refTime: (many.refTime - one.refTime) / 10,
    proofSize: (many.proofSize - one.proofSize) / 10,
    length: (many.length - one.length) / 10,
  };
  const weights = api.consts.system.blockWeights;
  const normal = weights.perClass.normal;
  const maxTotal = weight((normal.maxTotal.isSome ? normal.maxTotal.unwrap() : weights.maxBlock).toJSON());
  const block = {
    refTime: maxTotal.refTime - weight(weights.baseBlock.toJSON()).refTime,
    proofSize: maxTotal.proofSize,
    length: Number(api.consts.system.blockLength.max.normal.toString()),
  };
  const fits = {
    ref_time: perCall.refTime > 0 ? Math.floor((block.refTime - one.refTime) / perCall.refTime) + 1 : Infinity,
    proof_size:
      perCall.proofSize > 0 && block.proofSize > 0 ? Math.floor((block.proofSize - one.proofSize) / perCall.proofSize) + 1 : Infinity,
    length: Math.floor((block.length - one.length) / perCall.length) + 1,
  };
  const boundBy = (Object.keys(fits) as (keyof typeof fits)[]).reduce((a, b) => (fits[a] <= fits[b] ? a : b));
  const limit = api.consts.utility?.batchedCallsLimit;
  return { callsPerBlock: fits[boundBy], boundBy, perCall, block, batchedCallsLimit: limit ? Number(limit.toString()) : null };
}

/** A weight's two dimensions, from a v1 (a number) or v2 ({ refTime, proofSize } or snake_case) weight. */
function weight(json: unknown): { refTime: number; proofSize: number } {
  if (typeof json === 'number' || typeof json === 'string') return { refTime: Number(json), proofSize: 0 };
  const w = json as Record<string, number | string | undefined>;
  return { refTime: Number(w.refTime ?? w.ref_time ?? 0), proofSize: Number(w.proofSize ?? w.proof_size ?? 0) };
}

/** A registration's anchor call as a chain worker builds it (the `remark` dialect, the owner's signature inside). */
export function anchorCall(api: ApiPromise, relayer: string, atsId: number): Promise<string> {
  return remarkDialect.buildCall(
    api,
    {
      action: 'register',
      network: 'testnet',
      protocolVersion: 1,
      atsId: BigInt(atsId),
      version: 1,
      commitment: randomBytes(32),
      ownerSeed: randomBytes(32),
    },
    relayer,
  );
}
