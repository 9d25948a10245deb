import type { Knex } from 'knex';
import type { Config } from '../config';
import type { Logger } from '../logger';
import type { Network } from '../config';
import { lockGenesis, recordedGenesis, replaceGenesis } from './chain-genesis-repo';
import { forgetRelayerNonces } from './relayer-nonces-repo';
import { restartUnfinished } from './repo';
import { expireNetworkSubmissions, lastFinalizedBlock } from './submissions-repo';

/** The node serves another chain than the one this database's submissions were made on. */
export class ChainChanged extends Error {
  override readonly name = 'ChainChanged';
}

/** What the node says of its chain: its genesis, and the hash of its block at a height (none past its best). */
export interface ChainProbe {
  readonly genesis: string;
  blockHashAt(height: number): Promise<string | undefined>;
}

/** How long a chain, once found to be the one this database knows, is taken for it without looking again. */
const RECHECK_MS = 60_000;

/** Per database (a process may hold several in tests), when each network's chain was last found as known. */
const known = new WeakMap<object, Map<string, { genesis: string; at: number }>>();

/**
 * Makes sure the node of `network` serves the chain this database's chain state belongs to, before anything
 * is signed for it: the recorded genesis (the first one seen is recorded), and the block of the last batch
 * of this relayer this database saw finalized still at its height (a local chain started afresh from the same spec has the
 * same genesis, but not that block). Another chain stops submission with a clear error (the transactions
 * wait, nothing is refunded), except in development with CHAIN_FORGET_ON_NEW_GENESIS (`npm run dev`), where
 * the state of the old chain is forgotten and every unfinished transaction starts its way again.
 */
export async function ensureChainIdentity(
  app: { readonly db: Knex; readonly log: Logger; readonly config: Pick<Config, 'chainForgetOnNewGenesis'> },
  network: Network,
  relayer: string,
  probe: ChainProbe,
): Promise<void> {
  const seen = known.get(app.db) ?? new Map<string, { genesis: string; at: number }>();
  known.set(app.db, seen);
  const last = seen.get(`${network}:${relayer}`);
  if (last && last.genesis === probe.genesis && Date.now() - last.at < RECHECK_MS) return;
  const recorded = await recordedGenesis(app.db, network, probe.genesis);
  const anchor = await lastFinalizedBlock(app.db, network, relayer);
  const problem =
    recorded !== probe.genesis
      ? `serves the chain with genesis ${probe.genesis}, but this database's submissions were made on ${recorded}`
      : anchor && (await probe.blockHashAt(anchor.blockNumber)) !== anchor.blockHash
        ? `has no block ${anchor.blockHash} at height ${anchor.blockNumber}, where this database saw a batch finalized`
        : undefined;
  if (problem) {
    if (!app.config.chainForgetOnNewGenesis) {
      const message = `the ${network} node ${problem}: not submitting (is CHAIN_${network.toUpperCase()}_WS the right node?)`;
      app.log.error({ network, genesis: probe.genesis, recorded }, message);
      throw new ChainChanged(message);
    }
    await forgetChain(app, network, problem, probe.genesis);
  }
  seen.set(`${network}:${relayer}`, { genesis: probe.genesis, at: Date.now() });
}

async function forgetChain(
  app: { readonly db: Knex; readonly log: Logger },
  network: Network,
  problem: string,
  genesis: string,
): Promise<void> {
  const restarted = await app.db.transaction(async (trx) => {
    await lockGenesis(trx, network); // one process forgets at a time
    // the old chain's finalized batches stay as history; the ones on their way are gone with it
    await expireNetworkSubmissions(trx, network);
    await forgetRelayerNonces(trx, network);
    // the calls were signed for the old chain (the owner's signature covers its genesis): built again
    const restartedCount = await restartUnfinished(trx, network);
    await replaceGenesis(trx, network, genesis);
    return restartedCount;
  });
  app.log.warn(
    { network, genesis, restarted },
    `the local ${network} chain started afresh (the node ${problem}): forgot this database's state of the old chain; ${restarted} unfinished transactions start again on the new one`,
  );
}
