import type { Resources as AppContext } from '../resources';
import type { Network } from '../config';

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
export async function ensureChainIdentity(app: Pick<AppContext, 'db' | 'log' | 'config'>, network: Network, relayer: string, probe: ChainProbe): Promise<void> {
  const seen = known.get(app.db) ?? new Map<string, { genesis: string; at: number }>();
  known.set(app.db, seen);
  const last = seen.get(`${network}:${relayer}`);
  if (last && last.genesis === probe.genesis && Date.now() - last.at < RECHECK_MS) return;
  await app.db.raw('INSERT INTO chain_genesis (network, genesis_hash) VALUES (?, ?) ON CONFLICT (network) DO NOTHING', [network, probe.genesis]);
  const recorded = (await app.db('chain_genesis').where({ network }).first('genesis_hash')).genesis_hash as string;
  const anchor = await app.db('chain_submissions').where({ network, relayer, status: 'finalized' }).orderBy('block_number', 'desc').first('block_number', 'block_hash');
  const problem =
    recorded !== probe.genesis
      ? `serves the chain with genesis ${probe.genesis}, but this database's submissions were made on ${recorded}`
      : anchor && (await probe.blockHashAt(Number(anchor.block_number))) !== anchor.block_hash
        ? `has no block ${anchor.block_hash} at height ${anchor.block_number}, where this database saw a batch finalized`
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

async function forgetChain(app: Pick<AppContext, 'db' | 'log'>, network: Network, problem: string, genesis: string): Promise<void> {
  const restarted = await app.db.transaction(async (trx) => {
    await trx('chain_genesis').where({ network }).forUpdate().first('genesis_hash'); // one process forgets at a time
    // the old chain's finalized batches stay as history; the ones on their way are gone with it
    await trx('chain_submissions').where({ network }).whereIn('status', ['signed', 'in_block']).update({ status: 'expired', updated_at: trx.fn.now() });
    await trx('chain_submissions').where({ network, status: 'finalized' }).update({ status: 'expired', updated_at: trx.fn.now() });
    await trx('relayer_nonces').where({ network }).delete();
    // the calls were signed for the old chain (the owner's signature covers its genesis): built again
    const ids = await trx('transactions')
      .where({ network })
      .whereIn('status', ['pending', 'submitted', 'in_block'])
      .update({ status: 'pending', call_hex: null, submission_id: null, batch_index: null, tx_hash: null, block_hash: null, block_number: null, extrinsic_index: null, submit_after: null, updated_at: trx.fn.now() })
      .returning('id');
    await trx('chain_genesis').where({ network }).update({ genesis_hash: genesis, recorded_at: trx.fn.now() });
    return ids.length;
  });
  app.log.warn({ network, genesis, restarted }, `the local ${network} chain started afresh (the node ${problem}): forgot this database's state of the old chain; ${restarted} unfinished transactions start again on the new one`);
}
