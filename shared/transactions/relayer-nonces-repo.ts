import type { Knex } from 'knex';
import type { Network } from '../config';

/**
 * `relayer_nonces` is no longer written: the relayer's nonce comes from the chain and its batches on their
 * way, and the submitter's advisory lock serialises its allocation. Rows left by earlier versions only go
 * with their chain.
 */
export async function forgetRelayerNonces(db: Knex | Knex.Transaction, network: Network): Promise<void> {
  await db('relayer_nonces').where({ network }).delete();
}
