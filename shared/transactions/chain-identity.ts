import type { AppContext } from '../context';
import type { Network } from '../config';

/** The node serves another chain than the one this database's submissions were made on. */
export class ChainChanged extends Error {
  override readonly name = 'ChainChanged';
}

/** Per database (a process may hold several in tests), the genesis last found recorded for each network. */
const known = new WeakMap<object, Map<Network, string>>();

/**
 * Makes sure the node of `network` serves the chain this database's chain state belongs to, before anything
 * is signed for it. The first genesis seen is recorded. Another one stops submission with a clear error (the
 * transactions wait, nothing is refunded), except in development with CHAIN_FORGET_ON_NEW_GENESIS (a local
 * chain started afresh by `npm run dev`), where the state of the old chain is forgotten and every unfinished
 * transaction starts its way again on the new one.
 */
export async function ensureChainIdentity(app: Pick<AppContext, 'db' | 'log' | 'config'>, network: Network, genesis: string): Promise<void> {
  const seen = known.get(app.db) ?? new Map<Network, string>();
  known.set(app.db, seen);
  if (seen.get(network) === genesis) return;
  await app.db.raw('INSERT INTO chain_genesis (network, genesis_hash) VALUES (?, ?) ON CONFLICT (network) DO NOTHING', [network, genesis]);
  const recorded = (await app.db('chain_genesis').where({ network }).first('genesis_hash')).genesis_hash as string;
  if (recorded !== genesis) {
    if (!app.config.chainForgetOnNewGenesis) {
      const message = `the ${network} node serves the chain with genesis ${genesis}, but this database's submissions were made on ${recorded}: not submitting (check CHAIN_${network.toUpperCase()}_WS)`;
      app.log.error({ network, genesis, recorded }, message);
      throw new ChainChanged(message);
    }
    await forgetChain(app, network, recorded, genesis);
  }
  seen.set(network, genesis);
}

async function forgetChain(app: Pick<AppContext, 'db' | 'log'>, network: Network, recorded: string, genesis: string): Promise<void> {
  const restarted = await app.db.transaction(async (trx) => {
    const current = await trx('chain_genesis').where({ network }).forUpdate().first('genesis_hash');
    if (current.genesis_hash !== recorded) return 0; // another process did it
    await trx('chain_submissions').where({ network }).whereIn('status', ['signed', 'in_block']).update({ status: 'expired', updated_at: trx.fn.now() });
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
  app.log.warn(
    { network, genesis, recorded, restarted },
    `the local ${network} chain started afresh (genesis ${genesis}, was ${recorded}): forgot this database's state of the old chain; ${restarted} unfinished transactions start again on the new one`,
  );
}
