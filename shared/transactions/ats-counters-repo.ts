import type { Knex } from 'knex';
import type { Network } from '../config';

/** The network's next registration id (`ats_counters`, one row per network), taken in the caller's SQL transaction. */
export async function allocateAtsId(db: Knex | Knex.Transaction, network: Network): Promise<number> {
  const [row] = await db('ats_counters').where({ network }).increment('next_id', 1).returning('next_id');
  return Number(row.next_id) - 1;
}
