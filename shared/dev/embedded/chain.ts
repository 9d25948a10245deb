import { EventEmitter, once } from 'node:events';
import { withProcessEnv, type Env } from '../../config';
import { rococo_v2_2_asset_hub } from '@substrate/connect-known-chains';
import { createRequire } from 'node:module';
import { frontDoor } from './net';

export interface ChainHandle {
  readonly wsUrl: string;
  /** Builds one block now (tests); `{ leavePool: true }` builds it without the pool's extrinsics, as a full block would. */
  newBlock(options?: { readonly leavePool?: boolean }): Promise<void>;
  /**
   * Takes the node off the network for `ms` (every connection dropped, new ones refused), as a node restart
   * looks to its clients, while the chain itself keeps its state and keeps making blocks.
   */
  unreachableFor(ms: number): Promise<void>;
  /** Empties the node's pool without a word to the extrinsics' watches, as chopsticks does when a block's building fails (tests). */
  losePool(): void;
  /**
   * The next extrinsic submitted is left unanswered and kept out of the pool, as a submission the node was still
   * reading when it went away (tests): resolves once it has arrived, with a function that lets it go on as it came.
   * The next `unreachableFor` fails it. Submissions are taken one at a time: those after it wait.
   */
  holdNextSubmission(): Promise<() => void>;
  /** Submissions received so far, counted as they arrive, before each waits its turn (tests). */
  readonly submissionsReceived: number;
  /**
   * Submissions answered 1013 "Transaction Already Imported" (the pool held the very bytes), counted since the start,
   * and a promise of the next such answer (tests).
   */
  readonly alreadyImported: { readonly count: number; next(): Promise<void> };
  /**
   * From now on, a relayer batch (`utility` batch) of more than `calls` calls is refused as a node refuses a batch too
   * large for it: 1010 "Transaction would exhaust the block limits" (tests).
   * Undefined lifts it.
   */
  refuseBatchesOver(calls: number | undefined): void;
  stop(): Promise<void>;
}

export interface LocalChainOptions {
  /** Addresses to endow with native tokens at genesis (the relayer). */
  readonly endow: readonly string[];
  /** 'instant' builds a block per submitted extrinsic; a number builds one every that many ms. */
  readonly blocks: 'instant' | number;
  readonly port?: number;
  /** A SQLite file keeping the chain's blocks, so a restart with `resume` continues from its last block. */
  readonly db?: string;
  readonly resume?: boolean;
  /** Told of every block built, when its building began and ended (the pipeline bench's record of the chain's pace). */
  readonly onBlock?: (block: BuiltBlock) => void;
  /**
   * Told of every extrinsic a block's building refused (a nonce not yet due, a block already full): chopsticks then
   * drops it from its pool, and logs nothing (a Substrate node keeps one whose nonce is not yet due).
   */
  readonly onRefused?: (extrinsic: string, reason: string) => void;
}

export interface BuiltBlock {
  readonly number: number;
  /**
   * Date.now() when the block was asked for (the timer's tick, or the `newBlock` call), when its building began
   * (later than asked while the block before it was still being built) and when it was built.
   */
  readonly askedAt: number;
  readonly startedAt: number;
  readonly builtAt: number;
}

const ENDOWMENT = '1000000000000000000'; // 10^18 planck: ample for any local run

/**
 * The relayer's least time between batches on a local chain that builds a block every so many ms: 1000, where the
 * service's default (for a real node) is 250. chopsticks validates each extrinsic sent to it on the thread that
 * builds its blocks: a burst of 1,000 calls handed over in 22 extrinsics kept the blocks carrying it building 1.8 to
 * 2.1 s on average, in 7 or 8 extrinsics 0.8 to 0.9 s (`bench chain-alone`, docs/performance.md, section 19). A real
 * node validates apart from its block building, and there a longer interval would only make more calls miss the block
 * they were ready for. Unless the environment sets CHAIN_BATCH_INTERVAL_MS.
 */
export function localChainSettings(env: Env, blocks: 'instant' | number): Env {
  return blocks !== 'instant' && env.CHAIN_BATCH_INTERVAL_MS === undefined ? { CHAIN_BATCH_INTERVAL_MS: '1000' } : {};
}

/**
 * A real Substrate runtime, locally: chopsticks executing Rococo Asset Hub's runtime from the raw chain
 * spec shipped in @substrate/connect-known-chains, bound to 127.0.0.1, with the relayer funded at genesis. A resend
 * of bytes its pool holds is answered as a Substrate node answers it (`setupAsSubstrate`).
 */
export async function startLocalChain(options: LocalChainOptions): Promise<ChainHandle> {
  const chopsticks = loadChopsticks();
  const spec = JSON.parse(rococo_v2_2_asset_hub) as Record<string, unknown>;
  const alreadyImported = new EventEmitter();
  let answeredAlreadyImported = 0;
  alreadyImported.on('answered', () => (answeredAlreadyImported += 1));
  const beingBuilt = new Set<string>();
  const limits: Limits = {};
  const submissions = { received: 0 };
  const context = await setupAsSubstrate(alreadyImported, beingBuilt, limits, submissions, {
    genesis: spec as never,
    host: '127.0.0.1',
    port: 0,
    ...(options.db ? { db: options.db, resume: options.resume ?? false } : {}),
    'build-block-mode': options.blocks === 'instant' ? chopsticks.BuildBlockMode.Instant : chopsticks.BuildBlockMode.Manual,
    'import-storage': {
      System: { Account: options.endow.map((address) => [[address], { providers: 1, data: { free: ENDOWMENT } }]) },
    },
  } as never);

  const { onRefused } = options;
  if (onRefused)
    context.chain.txPool.event.on(chopsticksCore().APPLY_EXTRINSIC_ERROR, ([extrinsic, error]: [string, { toString(): string }]) =>
      onRefused(extrinsic, error.toString()),
    );

  let building: Promise<unknown> = Promise.resolve();
  const build = async (askedAt: number, leavePool = false) => {
    const startedAt = Date.now();
    // what the block takes from the pool is still held while it is built, as a Substrate node's pool holds it until import
    const taking = leavePool ? [] : context.chain.txPool.pendingExtrinsics;
    for (const bytes of taking) beingBuilt.add(bytes);
    try {
      const block = await context.chain.newBlock(leavePool ? { transactions: [] } : undefined);
      options.onBlock?.({ number: block.number, askedAt, startedAt, builtAt: Date.now() });
    } finally {
      for (const bytes of taking) beingBuilt.delete(bytes);
    }
  };
  const newBlock = (options?: { readonly leavePool?: boolean }) => {
    const askedAt = Date.now();
    return (building = building.then(() => build(askedAt, options?.leavePool)).catch(() => undefined)).then(() => undefined);
  };
  const timer = typeof options.blocks === 'number' ? setInterval(() => void newBlock(), options.blocks) : undefined;

  let front = await frontDoor(context.addr, options.port ?? 0);
  const port = front.port;

  const held: (() => void)[] = [];
  const chain = context.chain as { submitExtrinsic(extrinsic: string): Promise<unknown> };
  let stopped: Promise<void> | undefined;
  return {
    wsUrl: `ws://127.0.0.1:${port}`,
    newBlock,
    async unreachableFor(ms) {
      await front.close();
      for (const fail of held.splice(0)) fail();
      await new Promise((r) => setTimeout(r, ms));
      front = await frontDoor(context.addr, port);
    },
    losePool: () => context.chain.txPool.clear(),
    refuseBatchesOver: (calls) => (limits.batchCalls = calls),
    alreadyImported: {
      get count() {
        return answeredAlreadyImported;
      },
      next: () => once(alreadyImported, 'answered').then(() => undefined),
    },
    holdNextSubmission: () =>
      new Promise<() => void>((arrived) => {
        const submit = chain.submitExtrinsic.bind(chain); // chopsticks' own, not a later hold's
        chain.submitExtrinsic = (extrinsic) => {
          delete (chain as Partial<typeof chain>).submitExtrinsic; // the prototype's again, for every later one
          return new Promise((resolve, reject) => {
            const fail = () => reject(new Error('the node went away before answering'));
            held.push(fail);
            arrived(() => {
              if (!held.includes(fail)) return; // already failed by `unreachableFor`: the node never took it
              held.splice(held.indexOf(fail), 1);
              resolve(submit(extrinsic));
            });
          });
        };
      }),
    get submissionsReceived() {
      return submissions.received;
    },
    stop() {
      stopped ??= (async () => {
        if (timer) clearInterval(timer);
        await front.close();
        await building;
        await context.close();
        // chopsticks keeps its wasm executor in a worker thread; without this the process never exits.
        await chopsticks.destroyWorker();
      })();
      return stopped;
    },
  };
}

type Chopsticks = typeof import('@acala-network/chopsticks');
type Context = Awaited<ReturnType<Chopsticks['setupWithServer']>>;
type Handler = (request: { method: string; params?: unknown[] }, subscriptions: unknown) => Promise<unknown>;

const SUBMISSIONS = new Set(['author_submitExtrinsic', 'author_submitAndWatchExtrinsic']);

/** Limits the node holds submissions to beyond the runtime's (`refuseBatchesOver`). */
interface Limits {
  batchCalls?: number;
}

/**
 * chopsticks' `setupWithServer`, its server answering as a Substrate node where chopsticks does not: bytes its pool
 * holds already, or a block being built took from it (`beingBuilt`), submitted again, are refused with 1013
 * "Transaction Already Imported" (a second copy used to join the pool and fail in the block). `alreadyImported` emits
 * 'answered' at each such answer. While a test holds batches to a size (`limits`), a larger relayer batch is refused
 * with 1010 "Transaction would exhaust the block limits", as a node refuses a batch too large for it. Submissions are
 * taken one at a time in the order they arrived, each counted in `submissions` as it arrives, so that the pool holds a
 * sender's nonces in the order it sent them. Loaded after `loadChopsticks`, its parts share that quiet load.
 */
async function setupAsSubstrate(
  alreadyImported: EventEmitter,
  beingBuilt: ReadonlySet<string>,
  limits: Readonly<Limits>,
  submissions: { received: number },
  argv: Record<string, unknown>,
): Promise<Context> {
  const { setupContext } = fromChopsticks('@acala-network/chopsticks/context') as { setupContext(argv: unknown): Promise<Context> };
  const { createServer } = fromChopsticks('@acala-network/chopsticks/server') as {
    createServer(handler: Handler, port: number, host: string): Promise<{ addr: string; close(): Promise<void> }>;
  };
  const { handler } = fromChopsticks('@acala-network/chopsticks/rpc/index') as { handler(context: Context): Handler };
  const { ResponseError } = chopsticksCore();
  const context = await setupContext(argv);
  const answer = handler(context);
  const tooLarge = async (bytes: string, most: number) => {
    const { method } = (await context.chain.head.registry).createType('Extrinsic', bytes);
    return method.section === 'utility' && (method.args[0] as unknown as unknown[]).length > most;
  };
  const refusedAsTooLarge = (most: number) => {
    const refusal = new ResponseError(1010, 'Invalid Transaction: Transaction would exhaust the block limits');
    refusal.stack = `1010 ${refusal.message}: a batch of more than ${most} calls (a test's limit)`;
    return Promise.reject(refusal);
  };
  // submissions taken one at a time, in the order they arrived: chopsticks validates each on its executor and only
  // then adds it to its pool, so two validated at once could join the pool in the other order, and a block would then
  // refuse the later nonce as not yet due and drop it, with every nonce after it (a Substrate node orders its pool by
  // nonce, and keeps a transaction whose nonce is not yet due). One queue for every connection: a submission that
  // never settles (a held one not yet let go or failed) keeps every later one waiting
  let submitting: Promise<unknown> = Promise.resolve();
  const substrate: Handler = (request, subscriptions) => {
    if (!SUBMISSIONS.has(request.method)) return answer(request, subscriptions);
    submissions.received += 1;
    const turn = submitting.then(() => submission(request, subscriptions));
    submitting = turn.catch(() => undefined);
    return turn;
  };
  const submission: Handler = (request, subscriptions) => {
    const bytes = request.params?.[0] as `0x${string}`;
    const most = limits.batchCalls;
    if (most !== undefined)
      return tooLarge(bytes, most).then((refused) => (refused ? refusedAsTooLarge(most) : checked(request, subscriptions)));
    return checked(request, subscriptions);
  };
  const checked: Handler = (request, subscriptions) => {
    const bytes = request.params?.[0] as `0x${string}`;
    if (beingBuilt.has(bytes) || context.chain.txPool.pendingExtrinsics.includes(bytes)) {
      alreadyImported.emit('answered');
      // chopsticks' server logs a refusal's stack at error level: one line instead, saying it is an ordinary answer
      const refusal = new ResponseError(1013, 'Transaction Already Imported');
      refusal.stack = '1013 Transaction Already Imported: a resend of bytes the pool holds (an ordinary answer)';
      return Promise.reject(refusal);
    }
    return answer(request, subscriptions);
  };
  const server = await createServer(substrate, argv.port as number, argv.host as string);
  return {
    ...context,
    addr: server.addr,
    async close() {
      await context.chain.close();
      await (context as { fetchStorageWorker?: { terminate(): Promise<unknown> } }).fetchStorageWorker?.terminate();
      await server.close();
    },
  };
}

/** A module as chopsticks itself resolves it: its parts and its core, loaded with it (so already quiet). */
function fromChopsticks(id: string): unknown {
  return createRequire(require.resolve('@acala-network/chopsticks'))(id);
}

/** chopsticks' core. */
function chopsticksCore(): { ResponseError: new (code: number, message: string) => Error; APPLY_EXTRINSIC_ERROR: string } {
  return fromChopsticks('@acala-network/chopsticks-core') as ReturnType<typeof chopsticksCore>;
}

/**
 * chopsticks reads LOG_LEVEL once, when first loaded, and would log every block at info; load it quietly.
 * Loaded through CommonJS `require`, to stay on the same (CommonJS) copy of @polkadot/* as the rest of the process.
 */
function loadChopsticks(): Chopsticks {
  return withProcessEnv({ LOG_LEVEL: 'warn' }, () => createRequire(__filename)('@acala-network/chopsticks') as Chopsticks);
}
