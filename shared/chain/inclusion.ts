import type { ApiPromise } from '@polkadot/api';
import type { SignedBlock } from '@polkadot/types/interfaces';
import { chooseDialect } from './choose-dialect';
import type { ItemAssignment, ItemEvent } from './dialect';
import { nativeDecimals, tokenAmount, type TokenAmount } from './tokens';

/** How one item of a batch went: ran and succeeded, failed alone, or never ran (a plain batch stopped early). */
export interface ItemOutcome {
  readonly status: 'ok' | 'failed' | 'not_run';
  readonly error?: string;
  readonly assignment: ItemAssignment;
}

export interface Inclusion {
  readonly blockHash: string;
  readonly blockNumber: number;
  readonly index: number;
  readonly success: boolean;
  readonly error?: string;
  /** Per item, in batch order, read from the item's own events. */
  readonly items: readonly ItemOutcome[];
  /** What its signer (the relayer) paid for the extrinsic, read from its events (see `feeOf`). */
  readonly fee?: TokenAmount;
}

type EventRecord = {
  phase: { isApplyExtrinsic: boolean; asApplyExtrinsic: { toNumber(): number } };
  event: { section: string; method: string; data: { toJSON(): unknown } & unknown[] };
};

/** A block as its outcomes are read from it: its extrinsics, their hashes, and (read when first asked) their events. */
interface BlockRead {
  readonly block: SignedBlock;
  readonly hashes: readonly string[];
  /** The events of each extrinsic, by its index in the block. */
  events(): Promise<ReadonlyMap<number, readonly EventRecord['event'][]>>;
}

/** Per connection, the blocks read last: a block's content and events never change under its hash. */
const blocksRead = new WeakMap<ApiPromise, Map<string, Promise<BlockRead>>>();
/** How many blocks are kept per connection (those used last), and for how long after their read: only while the
 * batches they carry are being read (a decoded block of a burst and its events weigh megabytes). */
const BLOCKS_KEPT = 4;
const BLOCK_KEPT_MS = 15_000;

/**
 * The block, and its events once asked for, read and decoded once however many of its extrinsics are asked about: a
 * burst's block carries several relayer batches, and each batch's outcome used to read and decode the whole block and
 * all its events again (65 to 312 ms a batch under the pipeline bench, `docs/performance.md` section 21). A read that
 * failed is not kept: the next question reads again.
 */
function readBlock(api: ApiPromise, blockHash: string): Promise<BlockRead> {
  const kept = blocksRead.get(api) ?? blocksRead.set(api, new Map()).get(api)!;
  const known = kept.get(blockHash);
  if (known) {
    kept.delete(blockHash); // the last used goes last: a scan through older blocks evicts it after them
    kept.set(blockHash, known);
    return known;
  }
  const forget = (read: Promise<unknown>) => read.catch(() => kept.get(blockHash) === block && kept.delete(blockHash));
  let events: Promise<Map<number, EventRecord['event'][]>> | undefined;
  const readEvents = async () => {
    const records = (await (await api.at(blockHash)).query.system.events()) as unknown as EventRecord[];
    const byIndex = new Map<number, EventRecord['event'][]>();
    for (const r of records) {
      if (!r.phase.isApplyExtrinsic) continue;
      const index = r.phase.asApplyExtrinsic.toNumber();
      const list = byIndex.get(index);
      if (list) list.push(r.event);
      else byIndex.set(index, [r.event]);
    }
    return byIndex;
  };
  const block = api.rpc.chain.getBlock(blockHash).then((signed) => ({
    block: signed,
    hashes: signed.block.extrinsics.map((x) => x.hash.toHex()),
    events: () => {
      if (!events) forget((events = readEvents()));
      return events;
    },
  }));
  forget(block);
  kept.set(blockHash, block);
  if (kept.size > BLOCKS_KEPT) kept.delete(kept.keys().next().value!);
  setTimeout(() => kept.get(blockHash) === block && kept.delete(blockHash), BLOCK_KEPT_MS).unref();
  return block;
}

/** Where an extrinsic landed and how it and each of its batch items went, read from the block's events. */
export async function outcomeIn(api: ApiPromise, blockHash: string, extrinsicHash: string): Promise<Inclusion | undefined> {
  const read = await readBlock(api, blockHash);
  const index = read.hashes.indexOf(extrinsicHash);
  if (index < 0) return undefined;
  const extrinsic = read.block.block.extrinsics[index]!;
  const itemCount = isBatch(extrinsic.method) ? (extrinsic.method.args[0] as unknown as unknown[]).length : 1;
  const events = (await read.events()).get(index) ?? [];
  const dialect = chooseDialect(api);
  let success = false;
  let error: string | undefined;
  const items: ItemOutcome[] = [];
  let pending: ItemEvent[] = [];
  for (const event of events) {
    const name = `${event.section}.${event.method}`;
    if (name === 'system.ExtrinsicSuccess') success = true;
    else if (name === 'system.ExtrinsicFailed') error = describeDispatchError(api, event.data[0] as DispatchErrorLike);
    else if (name === 'utility.ItemCompleted') {
      items.push({ status: 'ok', assignment: dialect.readAssignment(pending) });
      pending = [];
    } else if (name === 'utility.ItemFailed') {
      items.push({ status: 'failed', error: describeDispatchError(api, event.data[0] as DispatchErrorLike), assignment: {} });
      pending = [];
    } else if (name === 'utility.BatchInterrupted') {
      // a plain batch stops at its first failure: that item failed, the ones after it never ran
      items.push({ status: 'failed', error: describeDispatchError(api, event.data[1] as DispatchErrorLike), assignment: {} });
      pending = [];
    } else pending.push({ section: event.section, method: event.method, data: event.data.toJSON() });
  }
  if (!success) items.length = 0; // nothing of a failed extrinsic stands
  while (items.length < itemCount)
    items.push({ status: success ? 'not_run' : 'failed', error: success ? undefined : error, assignment: {} });
  const fee = extrinsic.isSigned ? feeOf(events, extrinsic.signer.toString()) : undefined;
  const paid = fee === undefined ? {} : { fee: tokenAmount(fee, nativeDecimals(api)) };
  return { blockHash, blockNumber: read.block.block.header.number.toNumber(), index, success, error, items, ...paid };
}

/**
 * The fee the payer paid for an extrinsic, from the extrinsic's events: `transactionPayment.TransactionFeePaid`'s
 * actual fee where the runtime emits it; else (runtimes from before that event, the local chain's Asset Hub
 * among them) the payer's balance withdrawn less what was refunded to it (`balances.Withdraw`, `balances.Deposit`),
 * which is what its free balance lost. Undefined when the events say neither.
 */
function feeOf(events: readonly { section: string; method: string; data: unknown[] }[], payer: string): bigint | undefined {
  const paid = events.find((e) => e.section === 'transactionPayment' && e.method === 'TransactionFeePaid');
  if (paid) return BigInt(String(paid.data[1]));
  let net: bigint | undefined;
  for (const e of events) {
    if (e.section !== 'balances' || String(e.data[0]) !== payer) continue;
    if (e.method === 'Withdraw') net = (net ?? 0n) + BigInt(String(e.data[1]));
    else if (e.method === 'Deposit') net = (net ?? 0n) - BigInt(String(e.data[1]));
  }
  return net !== undefined && net >= 0n ? net : undefined;
}

/** Looks for an extrinsic in the canonical chain from a block onwards (after a crash between send and record). */
export async function findInclusion(api: ApiPromise, extrinsicHash: string, fromBlock: number): Promise<Inclusion | undefined> {
  const best = (await api.rpc.chain.getHeader()).number.toNumber();
  for (let n = Math.max(0, fromBlock); n <= best; n++) {
    const hash = (await api.rpc.chain.getBlockHash(n)).toHex();
    const found = await outcomeIn(api, hash, extrinsicHash);
    if (found) return found;
  }
  return undefined;
}

type DispatchErrorLike = { isModule?: boolean; asModule?: unknown; type?: string; toString(): string };

export function describeDispatchError(api: ApiPromise, error: DispatchErrorLike): string {
  if (error.isModule) {
    const meta = api.registry.findMetaError(error.asModule as Parameters<ApiPromise['registry']['findMetaError']>[0]);
    return `${meta.section}.${meta.name}`;
  }
  return error.type ?? error.toString();
}

function isBatch(method: { section: string; method: string }): boolean {
  return method.section === 'utility' && (method.method === 'batch' || method.method === 'forceBatch' || method.method === 'batchAll');
}
