import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { Keyring } from '@polkadot/keyring';
import type { KeyringPair } from '@polkadot/keyring/types';
import { cryptoWaitReady } from '@polkadot/util-crypto';
import { remarkDialect } from '../shared/chain/dialects/remark';
import { batchOf } from '../shared/chain/batch';
import { CHAIN_BATCH_INTERVAL_DEFAULT_MS } from '../shared/config';
import { benchMain, say } from './lib/main';
import { pick } from './lib/options';
import { BenchReport } from './lib/report';
import { startChainProcess, type ChainBlock, type ChainProcess } from './lib/processes';
import { percentile } from './lib/stats';

/**
 * The floor of `bench pipeline`'s confirm → webhook, with no service at all: the chain alone, fed the same anchor
 * calls at the pace the pipeline's confirms arrive (N calls over ARRIVAL_MS, about the confirm phase of its runs),
 * by a submitter that costs nothing (every call built and owner-signed beforehand, nothing stored, nothing
 * published), on the same chopsticks chain in a process of its own with a block every 2 s. It measures each call's
 * arrival → the end of the building of the block that carried it, which is where confirm → webhook would end if
 * finality, the service's records and the webhook took no time (finality comes with the block on this chain).
 *
 * Two ways of handing the calls over, runs alternating:
 * - `interval`: one batch of whatever has arrived every CHAIN_BATCH_INTERVAL_MS (as the service reads it), as the
 *   service's submitter does while calls keep arriving between blocks;
 * - `aligned`: one batch per block, sent LEAD_MS before the chain's timer begins building it: an oracle no service
 *   has (it reads the local chain's timer), the best a submitter could do on this chain.
 */
const BLOCK_MS = 2000;
const ARRIVAL_MS = 5000;
// as the service reads it: CHAIN_BATCH_INTERVAL_MS, else its default
const SERVICE_INTERVAL_MS = Number(process.env.CHAIN_BATCH_INTERVAL_MS ?? CHAIN_BATCH_INTERVAL_DEFAULT_MS);
const LEAD_MS = 300; // the node validates a batch before it is in its pool: 100–150 ms on this chain, idle
const TARGET_MS = 2 * BLOCK_MS; // bench pipeline's confirm → webhook target

type Strategy = 'interval' | 'aligned';

benchMain(async (options) => {
  const count = pick(options, options.size, 1000, 5);
  const runs = pick(options, options.runs, 3, 1);
  const arrivalMs = options.smoke ? 500 : ARRIVAL_MS;
  await cryptoWaitReady();
  const relayer = new Keyring({ type: 'sr25519' }).addFromUri(`//bench-chain-alone-${randomBytes(4).toString('hex')}`);
  const report = new BenchReport('chain-alone', options.smoke, {
    calls: count,
    arrival_ms: arrivalMs,
    block_ms: BLOCK_MS,
    interval_ms: SERVICE_INTERVAL_MS,
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
    await submitter.warm(await anchorCalls(api, relayer, Math.min(count, 200), 0));
    const results: Record<Strategy, Ride[]> = { interval: [], aligned: [] };
    for (let run = 0; run < runs; run++) {
      for (const strategy of ['interval', 'aligned'] as const) {
        const calls = await anchorCalls(api, relayer, count, (2 * run + (strategy === 'aligned' ? 1 : 0) + 1) * count);
        const ride = await rideOnce(api, chain, submitter, calls, arrivalMs, strategy);
        results[strategy].push(ride);
        say(
          `  run ${run + 1}, ${strategy}: ${ride.extrinsics} extrinsics in ${ride.blocks.length} blocks (${ride.blocks
            .map((b) => `${b.calls} calls built in ${b.buildMs} ms`)
            .join(', ')}), arrival → in its block p50 ${ride.p50} ms, p95 ${ride.p95} ms`,
        );
      }
    }
    report.parameters.blocks = results;
    for (const strategy of ['interval', 'aligned'] as const) {
      const label =
        strategy === 'interval'
          ? `a batch every ${SERVICE_INTERVAL_MS} ms (the service's)`
          : `one batch per block, sent ${LEAD_MS} ms before it`;
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

/** `count` anchor calls as chain workers build them (the owner's signature inside), ats ids from `from` + 1. */
async function anchorCalls(api: ApiPromise, relayer: KeyringPair, count: number, from: number): Promise<string[]> {
  const calls: string[] = [];
  for (let i = 0; i < count; i++)
    calls.push(
      await remarkDialect.buildCall(
        api,
        {
          action: 'register',
          network: 'testnet',
          protocolVersion: 1,
          atsId: BigInt(from + i + 1),
          version: 1,
          commitment: randomBytes(32),
          ownerSeed: randomBytes(32),
        },
        relayer.address,
      ),
    );
  return calls;
}

/** Signs and sends batches of calls with the relayer's next nonces; keeps which calls each extrinsic carried. */
class FreeSubmitter {
  constructor(
    private readonly api: ApiPromise,
    private readonly relayer: KeyringPair,
    private nonce: number,
  ) {}

  async send(calls: readonly string[]): Promise<string> {
    const tx = batchOf(this.api, calls);
    await tx.signAsync(this.relayer, { nonce: this.nonce++, era: 0 });
    await this.api.rpc.author.submitExtrinsic(tx.toHex());
    return tx.hash.toHex();
  }

  async warm(calls: readonly string[]): Promise<void> {
    const hash = await this.send(calls);
    for (let seen = false; !seen; await sleep(200)) {
      const block = await this.api.rpc.chain.getBlock();
      seen = block.block.extrinsics.some((x) => x.hash.toHex() === hash);
    }
  }
}

/** One run: the calls arrive evenly over `arrivalMs`, starting 700 ms after a block began building. */
async function rideOnce(
  api: ApiPromise,
  chain: ChainProcess,
  submitter: FreeSubmitter,
  calls: readonly string[],
  arrivalMs: number,
  strategy: Strategy,
): Promise<Ride> {
  // the chain's timer: an idle block's building begins at its tick (a busy one's may begin later, never sooner)
  const idle = await nextBlock(api, chain);
  const tick = (at: number) => idle.startedAt + Math.ceil((at - idle.startedAt) / BLOCK_MS) * BLOCK_MS;
  const start = tick(Date.now() + 100) + 700;
  const arrivals = calls.map((_, i) => start + (arrivalMs * i) / calls.length);
  const nextSend = (after: number) => (strategy === 'interval' ? after + SERVICE_INTERVAL_MS : tick(after + LEAD_MS + 1) - LEAD_MS);
  const carried = new Map<string, number[]>(); // extrinsic hash → the calls' indices
  let sendAt = strategy === 'interval' ? start : nextSend(start);
  for (let next = 0; next < calls.length; sendAt = nextSend(sendAt)) {
    await sleep(Math.max(0, sendAt - Date.now()));
    const ready: number[] = [];
    while (next < calls.length && arrivals[next]! <= Date.now()) ready.push(next++);
    if (ready.length) carried.set(await submitter.send(ready.map((i) => calls[i]!)), ready);
  }
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

/** Each call's block number, read from the chain's blocks after `scannedFrom` until every call is in one. */
async function untilCarried(
  api: ApiPromise,
  carried: ReadonlyMap<string, readonly number[]>,
  count: number,
  scannedFrom: number,
): Promise<Map<number, number>> {
  const blockOf = new Map<number, number>();
  let scanned = scannedFrom;
  while (blockOf.size < count) {
    const head = (await api.rpc.chain.getHeader()).number.toNumber();
    for (let n = scanned + 1; n <= head; n++) {
      const block = await api.rpc.chain.getBlock(await api.rpc.chain.getBlockHash(n));
      for (const x of block.block.extrinsics) for (const i of carried.get(x.hash.toHex()) ?? []) blockOf.set(i, n);
    }
    scanned = head;
    if (blockOf.size < count) await sleep(200);
  }
  return blockOf;
}
