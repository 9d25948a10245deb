import type { TransactionDeps } from './outcomes';
import type { Inclusion } from '../chain/anchors';
import { INVALID_NONCE_ERROR } from '../chain/dialects/ats';
import { failWithin } from './outcomes';
import { afterCommit, mergeEffects, type Effects } from './effects';
import { detachFromBatch, lockBatchItems, markInBlock } from './repo';
import { enterStep } from './steps';
import { markSubmissionGivenUp, markSubmissionInBlock, type SubmissionRow } from './submissions-repo';

/** The longest wait before a call refused with its relayer extrinsic is signed again (it doubles from 1 s). */
const MAX_RESEND_BACKOFF_S = 60;

/** Told the ids of the transactions a batch's outcome moved on, once it is committed. */
export type Announce = (transactionIds: readonly string[]) => void;

/** Every item's outcome, from its own events: included, failed alone (refunded), or back to be batched. */
export async function recordInclusion(
  app: TransactionDeps,
  announce: Announce,
  submission: SubmissionRow,
  inclusion: Inclusion,
): Promise<void> {
  const touched: string[] = [];
  let feeCounted = false;
  const deliveries = await app.db.transaction(async (trx) => {
    feeCounted = (await markSubmissionInBlock(trx, submission.id, inclusion)).firstFee;
    const items = await lockBatchItems(trx, submission.id);
    touched.push(...items.map((i) => i.id));
    const out: Effects[] = [];
    const ran: Parameters<typeof markInBlock>[2][number][] = [];
    for (const item of items) {
      const outcome = inclusion.items[item.batch_index];
      if (item.status === 'finalized' || item.status === 'failed') continue;
      if (outcome?.status === 'ok') {
        ran.push({
          id: item.id,
          steps: enterStep(item.steps, 'confirming'),
          ...(outcome.assignment.atsId !== undefined ? { atsId: outcome.assignment.atsId.toString() } : {}),
          ...(outcome.assignment.version !== undefined ? { version: outcome.assignment.version } : {}),
        });
      } else if (outcome?.status === 'not_run' || outcome?.error === INVALID_NONCE_ERROR) {
        // never ran, or (`ats`) signed over an owner nonce a dropped call before it left a hole at: passing
        await detachFromBatch(trx, item.id);
      } else {
        const error = outcome?.error ?? inclusion.error ?? 'unknown error';
        out.push(await failWithin(trx, app, item.id, 'chain.extrinsic_failed', `The transaction failed on chain: ${error}`));
      }
    }
    await markInBlock(trx, inclusion, ran);
    return out;
  });
  // once per batch, once committed (a retracted block's batch, found in the next, was counted already)
  if (inclusion.fee && feeCounted) app.metrics.relayerFeesPaid.inc({ network: submission.network }, inclusion.fee.tokens);
  announce(touched);
  await afterCommit(app, { ...mergeEffects(deliveries), published: touched });
  app.log.info(
    {
      network: submission.network,
      submission_id: submission.id,
      block: inclusion.blockNumber,
      ok: inclusion.items.filter((i) => i.status === 'ok').length,
      items: inclusion.items.length,
    },
    'batch in block',
  );
}

/**
 * The batch can never be included: send its calls out again in a new batch, signed afresh with the chain's
 * nonce and a new era, after a backoff (none after an expiry), for as long as CHAIN_GIVE_UP_AFTER allows
 * since confirm; past that, fail them (refunded). Its nonce, if unused, is free again: the next batch takes
 * the first the chain has not used and no batch on its way holds.
 */
export async function requeue(
  app: TransactionDeps,
  announce: Announce,
  submission: SubmissionRow,
  status: 'expired' | 'rejected',
  reason: string,
): Promise<void> {
  const touched: string[] = [];
  const giveUpAfter = app.config.chainGiveUpAfterSeconds;
  const deliveries = await app.db.transaction(async (trx) => {
    await markSubmissionGivenUp(trx, submission.id, status);
    const out: Effects[] = [];
    for (const item of await lockBatchItems(trx, submission.id)) {
      touched.push(item.id);
      if (Date.now() - new Date(item.created_at).getTime() < giveUpAfter * 1000) {
        const backoff = status === 'expired' ? 0 : Math.min(MAX_RESEND_BACKOFF_S, 2 ** Math.max(0, Number(item.signings) - 1));
        await detachFromBatch(trx, item.id, backoff);
      } else {
        const code = status === 'expired' ? 'chain.expired' : 'chain.submission_rejected';
        out.push(await failWithin(trx, app, item.id, code, `The chain did not take the transaction within ${giveUpAfter} s: ${reason}`));
      }
    }
    return out;
  });
  announce(touched);
  await afterCommit(app, { ...mergeEffects(deliveries), published: touched });
  app.log.warn(
    { network: submission.network, submission_id: submission.id, nonce: submission.nonce, status, reason },
    'batch not taken: its calls go out again',
  );
}
