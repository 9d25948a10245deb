import type { ApiPromise } from '@polkadot/api';
import type { KeyringPair } from '@polkadot/keyring/types';
import { batchOf } from './batch';

/** Blocks an extrinsic stays valid for (mortal era). */
export const ERA_PERIOD = 64;

export interface SignedBatch {
  readonly hex: string;
  readonly hash: string;
  readonly nonce: number;
  readonly signedAtBlock: number;
}

/**
 * Signs the relayer's batch of these calls with the given nonce and a mortal era born at the best block's parent
 * (the block @polkadot's own signing picks when finality lags, less likely retracted than the best; a batch born
 * on a retracted block is refused by the node and its calls go out again). Given here, the era costs no more than
 * the one question for the best header: left to @polkadot, a mortal era asks the node four more (the best header's
 * parent, the finalized head and its header), each waiting while a busy node builds a block. `signedAtBlock` is the
 * era's birth, from which it ends `ERA_PERIOD` blocks on (on the chain that carries the bytes: the submitter holds
 * them expired only once the finalized chain is past that). Nothing is sent.
 */
export async function signBatch(api: ApiPromise, relayer: KeyringPair, callHexes: readonly string[], nonce: number): Promise<SignedBatch> {
  const best = await api.rpc.chain.getHeader();
  const atGenesis = best.number.toNumber() === 0;
  const birth = { number: atGenesis ? 0 : best.number.toNumber() - 1, hash: atGenesis ? best.hash : best.parentHash };
  const era = api.createType('ExtrinsicEra', { current: birth.number, period: ERA_PERIOD });
  const signed = await batchOf(api, callHexes).signAsync(relayer, { nonce, era, blockHash: birth.hash });
  return { hex: signed.toHex(), hash: signed.hash.toHex(), nonce, signedAtBlock: birth.number };
}

/** The relayer's next index, extrinsics in the pool counted. */
export async function nextAccountIndex(api: ApiPromise, address: string): Promise<number> {
  return (await api.rpc.system.accountNextIndex(address)).toNumber();
}

/** The account's nonce in the state of block `at` (the best by default; extrinsics in the pool not counted). */
export async function accountNonceAt(api: ApiPromise, address: string, at?: string): Promise<number> {
  const state = at ? await api.at(at) : api;
  const account = (await state.query.system.account(address)) as unknown as { nonce: { toNumber(): number } };
  return account.nonce.toNumber();
}

/**
 * Sends the signed bytes and resolves with what `locate` reads of them once they are in a block (or rejects
 * with the pool's reason). Sending the same bytes twice can never include them twice: the relayer nonce is
 * part of them.
 *
 * A watch lives on its connection: @polkadot/api, once reconnected, subscribes again to everything but
 * `author_` watches, so a watch whose connection dropped would hear nothing more until `timeoutMs`. It ends,
 * with `WatchLost`, as soon as the connection is back, for the caller to look for the bytes on chain; and so it
 * does when `silent` resolves (with why): the caller's sign that the node has said nothing for too long.
 */
export function submitAndWatch<T>(
  api: ApiPromise,
  hex: string,
  timeoutMs: number,
  locate: (blockHash: string, extrinsicHash: string) => Promise<T | undefined>,
  silent?: Promise<string>,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let unsubscribe: (() => void) | undefined;
    let settled = false;
    let dropped = false;
    const onDisconnected = () => (dropped = true);
    const onConnected = () => {
      if (dropped) finish(() => reject(new WatchLost('the connection to the node dropped while the extrinsic was watched')));
    };
    api.on('disconnected', onDisconnected);
    api.on('connected', onConnected);
    const timer = setTimeout(() => finish(() => reject(new Error('timed out waiting for inclusion'))), timeoutMs);
    silent?.then(
      (why) => finish(() => reject(new WatchLost(why))),
      () => undefined,
    );
    const finish = (action: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      api.off('disconnected', onDisconnected);
      api.off('connected', onConnected);
      // a watch that lost its connection has no subscription left to end on the node
      if (!dropped) unsubscribe?.();
      action();
    };
    api.rpc.author
      .submitAndWatchExtrinsic(api.createType('Extrinsic', hex), (status) => {
        if (status.isInBlock || status.isFinalized) {
          const blockHash = (status.isInBlock ? status.asInBlock : status.asFinalized).toHex();
          const hash = api.createType('Extrinsic', hex).hash.toHex();
          locate(blockHash, hash).then(
            (found) => finish(() => (found ? resolve(found) : reject(new Error('extrinsic not found in its block')))),
            (err) => finish(() => reject(err)),
          );
        } else if (status.isDropped || status.isInvalid || status.isUsurped) {
          // the pool took the bytes, then let them go: a revalidation (or another node) may still include them
          finish(() => reject(new SubmissionRejected(`extrinsic ${status.type.toLowerCase()}`, true)));
        }
      })
      .then((u) => {
        unsubscribe = u;
        if (settled && !dropped) u();
      })
      .catch((err: Error) => finish(() => reject(classifySubmitError(err))));
  });
}

/**
 * The watch of sent bytes ended without news of them: its connection to the node dropped, or the node said nothing
 * of them for blocks. The bytes may be in a block, in the pool, or neither: not a refusal.
 */
export class WatchLost extends Error {
  override readonly name = 'WatchLost';
}

/**
 * The node refused the relayer's extrinsic, or dropped it from its pool: a refusal of the relayer's
 * envelope (nonce, era, fees, signature, pool space), never of a call inside it, whose own dispatch errors
 * are read from its block. `mayStillLand`: the node held these very bytes (1012 temporarily banned, 1013
 * already imported, or a watch that reported them invalid, dropped or usurped after the pool took them), so
 * they may still be included; otherwise (refused as they were sent) they can only be included if sent again.
 */
export class SubmissionRejected extends Error {
  override readonly name = 'SubmissionRejected';
  constructor(
    message: string,
    readonly mayStillLand = false,
  ) {
    super(message);
  }
}

function classifySubmitError(err: Error): Error {
  // 1010 invalid (stale or future nonce, payment, bad proof, ancient birth block, exhausts resources),
  // 1011 unknown validity, 1014 priority too low (another extrinsic holds the nonce): not in the pool.
  if (/^101[0124]|Invalid Transaction|Inability to pay|Priority is too low|Transaction is outdated|stale/i.test(err.message)) {
    return new SubmissionRejected(err.message);
  }
  if (/^101[23]|Temporarily Banned|Already Imported/i.test(err.message)) return new SubmissionRejected(err.message, true);
  return err;
}
