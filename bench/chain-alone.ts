import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { Keyring } from '@polkadot/keyring';
import type { KeyringPair } from '@polkadot/keyring/types';
import { cryptoWaitReady } from '@polkadot/util-crypto';
import { batchOf } from '../shared/chain/batch';
import { localChainSettings } from '../shared/dev/embedded/chain';
import { benchMain, say } from './lib/main';
import { pick } from './lib/options';
import { BenchReport } from './lib/report';
import { anchorCall } from './lib/chain-floor';
import { startChainProcess, type ChainBlock, type ChainProcess } from './lib/processes';
import { serviceSettings } from './lib/services';
import { percentile } from './lib/stats';

/**
 * The floor of `bench pipeline`'s confirm → webhook, with no service at all: the chain alone, fed the same anchor
 * calls at the pace the pipeline's confirms arrive (N calls over ARRIVAL_MS, about the confirm phase of its runs),
 * by a submitter that costs nothing (every call built and owner-signed beforehand, nothing stored, nothing
 * published), on the same chopsticks chain in a process of its own with a block every 2 s. It measures each call's
 * arrival → the end of the building of the block that carried it, which is where confirm → webhook would end if
 * finality, the service's records and the webhook took no time (finality comes with the block on this chain).
 *
 * Two ways of handing the calls over, alternating, each run's calls arriving from another point of the block
 * (a third, two thirds… of the way through it), the same for both ways:
 * - `interval`: as the service's submitter sends while calls keep arriving: what has arrived, at once when
 *   CHAIN_BATCH_INTERVAL_MS has passed since the last batch (as the service would read it on this chain,
 *   BENCH_SERVICE_ENV included), and at each new block;
 * - `aligned`: one batch per block, sent LEAD_MS before the chain's timer asks for the block: an oracle no service
 *   has (it reads the local chain's timer), the best a submitter could do on this chain.
 */
const BLOCK_MS = 2000;
const ARRIVAL_MS = 5000;
const LEAD_MS = 300; // the node validates a batch before it is in its pool: 100–150 ms on this chain, idle
const TARGET_MS = 2 * BLOCK_MS; // bench pipeline's confirm → webhook target
const POLL_MS = 5; // the submitter's look at what has arrived (the calls arrive every 5 ms at full size)
const CARRIED_WITHIN_MS = 60_000;

type Strategy = 'interval' | 'aligned';

benchMain(async (options) => {
  const count = pick(options, options.size, 1000, 5);
  const runs = pick(options, options.runs, 3, 1);
  const arrivalMs = options.smoke ? 500 : ARRIVAL_MS;
  const settings = serviceSettings();
  // as the service would read it on this chain: BENCH_SERVICE_ENV's, else the local chain's
  const intervalMs = Number({ ...settings, ...localChainSettings(settings, BLOCK_MS) }.CHAIN_BATCH_INTERVAL_MS);
  await cryptoWaitReady();
  const relayer = new Keyring({ type: 'sr25519' }).addFromUri(`//bench-chain-alone-${randomBytes(4).toString('hex')}`);
  const report = new BenchReport('chain-alone', options.smoke, {
    calls: count,
    arrival_ms: arrivalMs,
    block_ms: BLOCK_MS,
    interval_ms: intervalMs,
    lead_ms: LEAD_MS,
    runs,
    dialect: 'remark',
  });
  say(`chain-alone: ${count} anchor calls over ${arrivalMs} ms, a block every ${BLOCK_MS} ms, ${runs} runs of each way`);
  const chain = await startChainProcess(BLOCK_MS, relayer.address);
  const api = await ApiPromise.create({ provider: new WsProvider(chain.wsUrl), noInitWarn: true });
  try {
    const submitter = new FreeSubmitter(api, relayer, (await api.rpc.system.accountNextIndex(relayer.address)).toNumber());
    // warm the chain's executor: one batch of calls in a block before anything is timed
    const from = (await api.rpc.chain.getHeader()).number.toNumber();
    const warm = await anchorCalls(api, relayer, Math.min(count, 200), 0);
    await submitter.send(warm, [0]);
    await untilCarried(api, await submitter.sent(), 1, from);
    const results: Record<Strategy, Ride[]> = { interval: [], aligned: [] };
    for (let run = 0; run < runs; run++) {
      const offsetMs = Math.round(((run + 0.5) / runs) * BLOCK_MS);
      for (const strategy of ['interval', 'aligned'] as const) {
        const calls = await anchorCalls(api, relayer, count, (2 * run + (strategy === 'aligned' ? 1 : 0) + 1) * count);
        const ride = await rideOnce({ api, chain, submitter }, calls, { arrivalMs, offsetMs, intervalMs, strategy });
        results[strategy].push(ride);
        say(
          `  run ${run + 1} (arriving from ${offsetMs} ms into a block), ${strategy}: ${ride.extrinsics} extrinsics in ${ride.blocks.length} blocks (${ride.blocks
            .map((b) => `${b.calls} calls built in ${b.buildMs} ms`)
            .join(', ')}), arrival → in its block p50 ${ride.p50} ms, p95 ${ride.p95} ms`,
        );
      }
    }
    report.parameters.rides = results;
    for (const strategy of ['interval', 'aligned'] as const) {
      const label =
        strategy === 'interval'
          ? `a batch at most every ${intervalMs} ms and at each block (the service's way)`
          : `one batch per block, sent ${LEAD_MS} ms before it is asked for`;
      for (const q of ['p50', 'p95'] as const)
        report.add({
          id: `${strategy}_${q}_ms`,
          label: `the chain alone, arrival → in its block, ${q}: ${label}`,
          unit: 'ms',
          runs: results[strategy].map((r) => r[q]),
          ...(q === 'p95' && {
            floor: { label: 'one block', runs: results[strategy].map(() => BLOCK_MS) },
            target: { text: `the pipeline's ≤ 2 blocks (${TARGET_MS / 1000} s)`, met: (v: number) => v <= TARGET_MS },
          }),
        });
      report.add({
        id: `${strategy}_extrinsics`,
        label: `the chain alone, extrinsics that carried the calls: ${label}`,
        unit: 'extrinsics',
        runs: results[strategy].map((r) => r.extrinsics),
      });
      report.add({
        id: `${strategy}_build_ms`,
        label: `the chain alone, time building a block that carried calls (mean): ${label}`,
        unit: 'ms',
        runs: results[strategy].map((r) => r.blocks.reduce((sum, b) => sum + b.buildMs, 0) / r.blocks.length),
        floor: { label: 'asked of the chain', runs: results[strategy].map(() => BLOCK_MS) },
      });
    }
    report.note(
      "no service runs: arrival is when a call would have been confirmed, in its block is when the chain process finished building the block that carried it; the target is bench pipeline's, which adds finality, the service's records and the webhook to this; 'aligned' reads the local chain's timer, which no service can",
    );
    report.write(options.outDir);
  } finally {
    await api.disconnect();
    await chain.stop();
  }
});

interface Ride {
  readonly p50: number;
  readonly p95: number;
  readonly extrinsics: number;
  readonly blocks: readonly { readonly number: number; readonly calls: number; readonly buildMs: number }[];
}

/** `count` anchor calls as chain workers build them, ats ids from `from` + 1. */
async function anchorCalls(api: ApiPromise, relayer: KeyringPair, count: number, from: number): Promise<string[]> {
  const calls: string[] = [];
  for (let i = 0; i < count; i++) calls.push(await anchorCall(api, relayer.address, from + i + 1));
  return calls;
}

/**
 * Signs batches with the relayer's next nonces (immortal: nothing here outlives an era) and sends them without
 * waiting for the node's answer, as the service's submitter does; keeps which calls each extrinsic carried.
 */
class FreeSubmitter {
  private carried = new Map<string, readonly number[]>();
  private sending: Promise<unknown>[] = [];

  constructor(
    private readonly api: ApiPromise,
    private readonly relayer: KeyringPair,
    private nonce: number,
  ) {}

  /** Sends one batch of `calls`, which are the run's calls `indices`. */
  async send(calls: readonly string[], indices: readonly number[]): Promise<void> {
    const tx = await batchOf(this.api, calls).signAsync(this.relayer, { nonce: this.nonce++, era: 0 });
    this.carried.set(tx.hash.toHex(), indices);
    this.sending.push(this.api.rpc.author.submitExtrinsic(tx.toHex()));
  }

  /** Once every batch sent since the last call has been answered (a refusal throws): which calls each carried. */
  async sent(): Promise<Map<string, readonly number[]>> {
    const [carried, sending] = [this.carried, this.sending];
    [this.carried, this.sending] = [new Map(), []];
    await Promise.all(sending);
    return carried;
  }
}

interface RideDeps {
  readonly api: ApiPromise;
  readonly chain: ChainProcess;
  readonly submitter: FreeSubmitter;
}

/** One run: the calls arrive evenly over `arrivalMs`, from `offsetMs` after the chain's timer asked for a block. */
async function rideOnce(
  { api, chain, submitter }: RideDeps,
  calls: readonly string[],
  how: { readonly arrivalMs: number; readonly offsetMs: number; readonly intervalMs: number; readonly strategy: Strategy },
): Promise<Ride> {
  const idle = await nextBlock(api, chain);
  // the chain's timer, from the latest block it asked for (setInterval's ticks drift by their lateness)
  const nextTick = async (after: number) => {
    const latest = (await chain.blocks()).at(-1) ?? idle;
    return latest.askedAt + Math.ceil((after - latest.askedAt) / BLOCK_MS) * BLOCK_MS;
  };
  const start = (await nextTick(Date.now() + 100)) + how.offsetMs;
  const arrivals = calls.map((_, i) => start + (how.arrivalMs * i) / calls.length);
  let newBlock = false;
  const unsubscribe = await api.rpc.chain.subscribeNewHeads(() => {
    newBlock = true;
  });
  try {
    let [next, sentAt] = [0, -Infinity];
    let alignedAt = how.strategy === 'aligned' ? (await nextTick(start + LEAD_MS)) - LEAD_MS : 0;
    await sleep(Math.max(0, start - Date.now()));
    while (next < calls.length) {
      await sleep(POLL_MS);
      const now = Date.now();
      const due = how.strategy === 'interval' ? now >= sentAt + how.intervalMs || newBlock : now >= alignedAt;
      if (!due || arrivals[next]! > now) continue;
      const ready: number[] = [];
      while (next < calls.length && arrivals[next]! <= now) ready.push(next++);
      await submitter.send(
        ready.map((i) => calls[i]!),
        ready,
      );
      [sentAt, newBlock] = [now, false];
      if (how.strategy === 'aligned') alignedAt = (await nextTick(now + LEAD_MS + 1)) - LEAD_MS;
    }
  } finally {
    await unsubscribe();
  }
  const carried = await submitter.sent();
  const blockOf = await untilCarried(api, carried, calls.length, idle.number);
  const built = new Map<number, ChainBlock>((await chain.blocks(Math.max(...blockOf.values()))).map((b) => [b.number, b]));
  const rides = [...blockOf].map(([i, n]) => built.get(n)!.builtAt - arrivals[i]!);
  const numbers = [...new Set(blockOf.values())].sort((a, b) => a - b);
  return {
    p50: Math.round(percentile(rides, 50)),
    p95: Math.round(percentile(rides, 95)),
    extrinsics: carried.size,
    blocks: numbers.map((n) => ({
      number: n,
      calls: [...blockOf.values()].filter((m) => m === n).length,
      buildMs: built.get(n)!.builtAt - built.get(n)!.startedAt,
    })),
  };
}

/** The next block the chain builds, once built. */
async function nextBlock(api: ApiPromise, chain: ChainProcess): Promise<ChainBlock> {
  const head = (await api.rpc.chain.getHeader()).number.toNumber();
  return (await chain.blocks(head + 1)).find((b) => b.number === head + 1)!;
}

/**
 * Each call's block number, read from every block after `scannedFrom` until every call is in one; throws after
 * CARRIED_WITHIN_MS (a batch the node dropped) rather than wait for ever.
 */
async function untilCarried(
  api: ApiPromise,
  carried: ReadonlyMap<string, readonly number[]>,
  count: number,
  scannedFrom: number,
): Promise<Map<number, number>> {
  const blockOf = new Map<number, number>();
  const deadline = Date.now() + CARRIED_WITHIN_MS;
  for (let scanned = scannedFrom; blockOf.size < count; await sleep(200)) {
    if (Date.now() > deadline) throw new Error(`${count - blockOf.size} of ${count} calls in no block after ${CARRIED_WITHIN_MS} ms`);
    const head = (await api.rpc.chain.getHeader()).number.toNumber();
    for (; scanned < head; scanned++) {
      const block = await api.rpc.chain.getBlock(await api.rpc.chain.getBlockHash(scanned + 1));
      for (const x of block.block.extrinsics) for (const i of carried.get(x.hash.toHex()) ?? []) blockOf.set(i, scanned + 1);
    }
  }
  return blockOf;
}
