import type { Knex } from 'knex';
import type { Network } from '../config';
import type { AnchorService } from '../chain/anchors';
import { allocateNonces } from '../chain/nonces';
import type { TransactionDeps } from './outcomes';
import { lockUnbatched, markBatched } from './repo';
import { insertSubmission, unfinalNonces, type SubmissionRow } from './submissions-repo';
import { withOwnerNonces } from './owner-nonces';
import { enterStep } from './steps';

/**
 * Allocates the nonce, signs the batch and stores it with its items, all before anything is sent. The
 * chain is the truth for the nonce: the relayer's nonce in the best block's state or, past it, the first that
 * none of this relayer's own batches not yet final holds (on their way, sent or not; or seen in a block a reorg
 * may take back); never a number remembered from before (a restored backup, a chain started afresh, a relayer
 * used by something else would all make it wrong). The state is read, not the node's pool-counted next index:
 * chopsticks computes that with a runtime call that waits for the block it is building (0.4 to 1.2 s a round
 * under a burst, `docs/performance.md` section 20). The pool holds only this relayer's own batches unless
 * something else signs with its key; then the node refuses the clash, or takes ours in its stead, and whichever
 * lost goes out again once the other is in a block (each refusal of ours backs off further). The batches not yet
 * final are read before the state: a batch recorded in a block in between is then counted by both, never by
 * neither. Only the holder of the relayer's advisory lock (`RelayerSubmitter`'s `withRelayerLock`) gets here, in a
 * transaction `trx` on the lock's connection, which is what serialises it.
 */
export async function signAndStoreBatch(
  { app, anchors }: { readonly app: TransactionDeps; readonly anchors: AnchorService },
  trx: Knex.Transaction,
  network: Network,
  transactionIds: readonly string[],
): Promise<SubmissionRow | undefined> {
  const relayer = anchors.relayerAddress(network);
  const genesis = (await anchors.genesisHash(network)).toString('hex');
  const items = await lockUnbatched(trx, transactionIds);
  if (!items.length) return undefined;
  // the first nonce from the chain's that no batch not yet final holds (a batch given up leaves a hole to fill)
  const unfinal = await unfinalNonces(trx, network, relayer);
  const chainNonce = await anchors.onChainNonce(network);
  const nonce = Number(allocateNonces(BigInt(chainNonce), unfinal, 1).nonces[0]);
  const callHexes =
    (await anchors.dialect(network)) === 'ats'
      ? await withOwnerNonces({ app, anchors }, trx, network, items)
      : items.map((i) => i.call_hex);
  const signed = await anchors.signBatch(network, callHexes, nonce);
  const row = await insertSubmission(trx, {
    network,
    relayer,
    nonce,
    genesisHash: genesis,
    extrinsicHex: signed.hex,
    txHash: signed.hash,
    signedAtBlock: signed.signedAtBlock,
    items: items.length,
  });
  await markBatched(
    trx,
    { id: row.id, txHash: signed.hash },
    items.map((item) => ({ id: item.id, steps: enterStep(item.steps, 'submitting') })),
  );
  app.log.info({ network, submission_id: row.id, nonce, items: items.length, tx_hash: signed.hash }, 'batch signed');
  return row;
}
