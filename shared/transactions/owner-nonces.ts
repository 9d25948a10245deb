import type { Knex } from 'knex';
import type { Network } from '../config';
import { allocateNonces } from '../chain/nonces';
import { findWallet } from '../organizations/repo';
import { buildOwnerCall, type OwnerCallDeps } from './owner-call';
import { findTransaction, findTransactions, ownerNoncesIn, setOwnerCall } from './repo';
import { signedSubmissionIds } from './submissions-repo';

/**
 * `ats`: signs each call again over the owner nonce it must carry, in batch order (chain/nonces.ts). Run
 * under the relayer's lock, like the relayer's nonce. Returns the calls to batch.
 */
export async function withOwnerNonces(
  deps: OwnerCallDeps,
  trx: Knex.Transaction,
  network: Network,
  items: readonly { id: string; call_hex: string }[],
): Promise<string[]> {
  const { app, anchors } = deps;
  const organizationOf = new Map(
    (
      await findTransactions(
        trx,
        items.map((i) => i.id),
      )
    ).map((o) => [o.id, o.organizationId]),
  );
  const calls = new Map<string, string>();
  for (const organizationId of new Set(organizationOf.values())) {
    // an organization without a wallet on the network has no owner to sign: its calls go as they are
    const wallet = await findWallet(trx, organizationId, network);
    if (!wallet) continue;
    const mine = items.filter((i) => organizationOf.get(i.id) === organizationId);
    const publicKey = String(wallet.publicKey).replace(/^0x/, '');
    const chainNonce = await anchors.ownerNonce(network, Buffer.from(publicKey, 'hex'));
    const onTheirWay = await ownerNoncesIn(trx, organizationId, network, signedSubmissionIds(trx));
    const { nonces, doomed } = allocateNonces(chainNonce, onTheirWay, mine.length);
    if (doomed.length)
      app.log.info(
        { network, organization_id: organizationId, doomed: doomed.map(String) },
        'owner calls on their way past a hole: signed again once they fail',
      );
    for (const [k, item] of mine.entries()) {
      const tx = (await findTransaction(trx, item.id))!;
      const hex = await buildOwnerCall(deps, tx, nonces[k]!);
      await setOwnerCall(trx, item.id, hex, nonces[k]!);
      calls.set(item.id, hex);
    }
  }
  return items.map((i) => calls.get(i.id) ?? i.call_hex);
}
