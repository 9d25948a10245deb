import type { Knex } from 'knex';
import type { Network } from '../config';

type Db = Knex | Knex.Transaction;

/** The genesis recorded for the network: `genesis` when none was yet (the first seen is recorded). */
export async function recordedGenesis(db: Db, network: Network, genesis: string): Promise<string> {
  await db.raw('INSERT INTO chain_genesis (network, genesis_hash) VALUES (?, ?) ON CONFLICT (network) DO NOTHING', [network, genesis]);
  return (await db('chain_genesis').where({ network }).first('genesis_hash')).genesis_hash as string;
}

/** Row lock on the network's genesis, held to the end of the transaction. */
export async function lockGenesis(trx: Knex.Transaction, network: Network): Promise<void> {
  await trx('chain_genesis').where({ network }).forUpdate().first('genesis_hash');
}

export async function replaceGenesis(db: Db, network: Network, genesis: string): Promise<void> {
  await db('chain_genesis').where({ network }).update({ genesis_hash: genesis, recorded_at: db.fn.now() });
}
