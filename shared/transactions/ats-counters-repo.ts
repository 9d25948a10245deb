import type { Knex } from 'knex';
import type { Network } from '../config';
import { prepared } from '../db/knex';

/** The network's next registration id (`ats_counters`, one row per network), taken in the caller's SQL transaction. */
export async function allocateAtsId(db: Knex | Knex.Transaction, network: Network): Promise<number> {
  const { rows } = await prepared(
    db,
    'ats_counters_next',
    'UPDATE ats_counters SET next_id = next_id + 1 WHERE network = $1 RETURNING next_id',
    [network],
  );
  if (!rows[0]) throw new Error(`no ats_id counter for network ${network}`);
  return Number(rows[0].next_id) - 1;
}
