import type { ApiPromise, WsProvider } from '@polkadot/api';
import type { KeyringPair } from '@polkadot/keyring/types';
import { batchOf } from './batch';
import { bestBlockNumber, type HeightWatch } from './heads';

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

/** The account's nonce in the state of block `at` (the best by default; extrinsics in the pool not counted). */
export async function accountNonceAt(api: ApiPromise, address: string, at?: string): Promise<number> {
  const state = at ? await api.at(at) : api;
  const account = (await state.query.system.account(address)) as unknown as { nonce: { toNumber(): number } };
  return account.nonce.toNumber();
}

/** What a relayer batch's watch needs of the node: the API (types) and its provider, asked directly. */
export interface WatchVia {
  readonly api: ApiPromise;
  readonly provider: WsProvider;
}

const WATCH = { type: 'author_extrinsicUpdate', subscribe: 'author_submitAndWatchExtrinsic', unsubscribe: 'author_unwatchExtrinsic' };

/**
 * Sends the signed bytes and resolves with what `locate` reads of them once they are in a block (or rejects
 * with the pool's reason). Sending the same bytes twice can never include them twice: the relayer nonce is
 * part of them.
 *
 * The watch is asked of the provider, not of `api.rpc`: @polkadot/rpc-core shares one subscription among calls with
 * the same parameters, so a watch of these bytes asked again would be handed one already ended (a resend would never
 * reach the node). A watch lives on its connection: the provider, once reconnected, subscribes again to everything but
 * `author_` watches, so a watch whose connection dropped would hear nothing more until `timeoutMs`. It ends, with
 * `WatchLost`, as soon as the connection is back, for the caller to look for the bytes on chain; and so it does when
 * `silent` resolves (with why): the caller's sign that the node has lost them.
 */
export function submitAndWatch<T>(
  { api, provider }: WatchVia,
  hex: string,
  timeoutMs: number,
  locate: (blockHash: string, extrinsicHash: string) => Promise<T | undefined>,
  silent?: Promise<string>,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let dropped = false;
    let located = false;
    let subscription: Promise<number | string> | undefined;
    const finish = (action: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      api.off('disconnected', onDisconnected);
      api.off('connected', onConnected);
      // ends the node's watch (a watch that went with its connection is no longer the provider's: it answers false)
      void subscription?.then((id) => provider.unsubscribe(WATCH.type, WATCH.unsubscribe, id)).catch(() => undefined);
      action();
    };
    const onDisconnected = () => (dropped = true);
    const onConnected = () => {
      if (dropped) finish(() => reject(new WatchLost('the connection to the node dropped while the extrinsic was watched')));
    };
    const timer = setTimeout(() => finish(() => reject(new Error('timed out waiting for inclusion'))), timeoutMs);
    api.on('disconnected', onDisconnected);
    api.on('connected', onConnected);
    // (not once the bytes were seen in a block: their outcome is being read)
    silent?.then(
      (why) => located || finish(() => reject(new WatchLost(why))),
      () => undefined,
    );
    try {
      const hash = api.createType('Extrinsic', hex).hash.toHex();
      subscription = provider.subscribe(WATCH.type, WATCH.subscribe, [hex], (error: Error | null, update: unknown) => {
        if (error) return finish(() => reject(classifySubmitError(error)));
        const status = api.createType('ExtrinsicStatus', update);
        if (status.isInBlock || status.isFinalized) {
          const blockHash = (status.isInBlock ? status.asInBlock : status.asFinalized).toHex();
          located = true;
          locate(blockHash, hash).then(
            (found) => finish(() => (found ? resolve(found) : reject(new Error('extrinsic not found in its block')))),
            (err) => finish(() => reject(err)),
          );
        } else if (status.isDropped || status.isInvalid || status.isUsurped) {
          // the pool took the bytes, then let them go: a revalidation (or another node) may still include them
          finish(() => reject(new SubmissionRejected(`extrinsic ${status.type.toLowerCase()}`, true)));
        }
      });
      // a connection that drops before the node answered fails the request before the provider says it dropped: the
      // bytes may have reached the node, and the watch ends as one whose connection dropped (onConnected)
      subscription.catch((err: Error) => (provider.isConnected ? finish(() => reject(classifySubmitError(err))) : (dropped = true)));
    } catch (err) {
      finish(() => reject(err));
    }
  });
}

/** What following sent bytes without a watch needs: the connection, its best heads, and a look for the bytes on chain. */
export interface Follow<T> {
  readonly api: ApiPromise;
  readonly heads: HeightWatch;
  /** Looks for the bytes on the canonical chain (from their era's birth); undefined while they are in no block. */
  readonly find: () => Promise<T | undefined>;
}

/**
 * Bytes the node holds, followed without a watch (it gives none with 1013, `AlreadyImported`): looked for at every new
 * best block until found; until the node has lost them (`lost`, with why; a count that failed ends nothing, as for a
 * watch) or its connection dropped and came back (a restart may have lost its pool), either with WatchLost, for the
 * caller to look and send again; or until `deadline`. `signal` ends the listening (the caller aborts it when done).
 * A resend of them used to be looked for again only at later rounds of the submitter, sent again each time.
 */
export async function followHeld<T>(
  { api, heads, find }: Follow<T>,
  deadline: number,
  lost: Promise<string>,
  signal: AbortSignal,
): Promise<T> {
  let gone: string | undefined;
  const quiet = lost.then(
    (why) => void (gone = why),
    () => new Promise<never>(() => undefined),
  );
  let dropped = false;
  const ended = new Promise<never>((_, reject) => {
    const onDisconnected = () => (dropped = true);
    const onConnected = () => dropped && reject(new WatchLost('the connection to the node dropped while the extrinsic was followed'));
    const timer = setTimeout(() => reject(new Error('timed out waiting for inclusion')), Math.max(1, deadline - Date.now()));
    api.on('disconnected', onDisconnected);
    api.on('connected', onConnected);
    signal.addEventListener(
      'abort',
      () => (clearTimeout(timer), api.off('disconnected', onDisconnected), api.off('connected', onConnected)),
    );
  });
  ended.catch(() => undefined);
  // strictly higher each time: a best chain gone back to a shorter fork is not looked through in a loop
  for (let next = 0; ;) {
    try {
      const best = await bestBlockNumber(api);
      const found = await find();
      if (found) return found;
      next = Math.max(next + 1, best + 1);
    } catch (err) {
      if (!dropped) throw err;
      await ended; // a question that failed with the connection: as a watch whose connection dropped, once it is back
    }
    if (gone !== undefined) throw new WatchLost(gone);
    await Promise.race([heads.reached(next, Math.max(1, deadline - Date.now()), signal), quiet, ended]);
  }
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
  override readonly name: string = 'SubmissionRejected';
  constructor(
    message: string,
    readonly mayStillLand = false,
  ) {
    super(message);
  }
}

/**
 * The node's refusal of a submission, told apart (exported for its unit test). 1012 (temporarily banned: the node saw
 * these bytes lately, in a block perhaps) and 1013 (already imported) mean the node held them: they may still land.
 */
export function classifySubmitError(err: Error): Error {
  // 1010 invalid (stale or future nonce, payment, bad proof, ancient birth block, exhausts resources),
  // 1011 unknown validity, 1014 priority too low (another extrinsic holds the nonce): not in the pool.
  if (/exhaust the block limits|ExhaustsResources/i.test(err.message)) return new ExhaustsResources(err.message);
  if (/^101[014]|Invalid Transaction|Inability to pay|Priority is too low|Transaction is outdated|stale/i.test(err.message)) {
    return new SubmissionRejected(err.message);
  }
  if (/^1013|Already Imported/i.test(err.message)) return new AlreadyImported(err.message);
  if (/^1012|Temporarily Banned/i.test(err.message)) return new SubmissionRejected(err.message, true);
  return err;
}

/**
 * 1010 "Transaction would exhaust the block limits": the batch is too heavy or too long for the node, though the
 * runtime's answers had it fit (a weight the runtime under-reports, a node that counts more than they tell). Its calls
 * go out again in smaller batches (`refusedAsTooLarge`, batch.ts).
 */
export class ExhaustsResources extends SubmissionRejected {
  override readonly name = 'ExhaustsResources';
}

/**
 * 1013: the node's pool holds these very bytes now (an earlier send's, whose watch went with its connection). No watch
 * comes with this answer: the caller follows the bytes itself (`AnchorService.submit`).
 */
export class AlreadyImported extends SubmissionRejected {
  override readonly name = 'AlreadyImported';
  constructor(message: string) {
    super(message, true);
  }
}
