import { withProcessEnv } from '../config';
import { rococo_v2_2_asset_hub } from '@substrate/connect-known-chains';

export interface ChainHandle {
  readonly wsUrl: string;
  /** Builds one block now (tests). */
  newBlock(): Promise<void>;
  stop(): Promise<void>;
}

export interface LocalChainOptions {
  /** Addresses to endow with native tokens at genesis (the relayer). */
  readonly endow: readonly string[];
  /** 'instant' builds a block per submitted extrinsic; a number builds one every that many ms. */
  readonly blocks: 'instant' | number;
  readonly port?: number;
}

const ENDOWMENT = '1000000000000000000'; // 10^18 planck: ample for any local run

/**
 * A real Substrate runtime, locally: chopsticks executing Rococo Asset Hub's runtime from the raw chain
 * spec shipped in @substrate/connect-known-chains, bound to 127.0.0.1, with the relayer funded at genesis.
 */
export async function startLocalChain(options: LocalChainOptions): Promise<ChainHandle> {
  const chopsticks = loadChopsticks();
  const spec = JSON.parse(rococo_v2_2_asset_hub) as Record<string, unknown>;
  const context = await chopsticks.setupWithServer({
    genesis: spec as never,
    host: '127.0.0.1',
    port: options.port ?? 0,
    'build-block-mode': options.blocks === 'instant' ? chopsticks.BuildBlockMode.Instant : chopsticks.BuildBlockMode.Manual,
    'import-storage': {
      System: { Account: options.endow.map((address) => [[address], { providers: 1, data: { free: ENDOWMENT } }]) },
    },
  } as never);

  let building: Promise<unknown> = Promise.resolve();
  const newBlock = () => (building = building.then(() => context.chain.newBlock()).catch(() => undefined)).then(() => undefined);
  const timer = typeof options.blocks === 'number' ? setInterval(() => void newBlock(), options.blocks) : undefined;

  return {
    wsUrl: `ws://${context.addr}`,
    newBlock,
    async stop() {
      if (timer) clearInterval(timer);
      await building;
      await context.close();
      // chopsticks keeps its wasm executor in a worker thread; without this the process never exits.
      await chopsticks.destroyWorker();
    },
  };
}


type Chopsticks = typeof import('@acala-network/chopsticks');

/**
 * chopsticks reads LOG_LEVEL once, when first loaded, and would log every block at info; load it quietly.
 * `require` keeps it on the same (CommonJS) copy of @polkadot/* as the rest of the process.
 */
function loadChopsticks(): Chopsticks {
  return withProcessEnv({ LOG_LEVEL: 'warn' }, () => require('@acala-network/chopsticks') as Chopsticks);
}
