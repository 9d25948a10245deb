import { setTimeout as delay } from 'node:timers/promises';
import type { TransactionDeps } from './outcomes';
import type { AnchorService } from '../chain/anchors';
import { finalize } from './outcomes';
import { lockLatestVersion } from '../works/repo';
import { earlierVersionUnfinished, findTransaction, setCallOnce, setVersionOnce, updateTransaction, type TransactionRow } from './repo';
import { findSubmission, markSubmissionFinalized } from './submissions-repo';
import { trace, type Span } from '@opentelemetry/api';
import { ATTR, inSpan } from '../telemetry/tracing';
import { buildOwnerCall } from './owner-call';
import { enterStep, type StepName } from './steps';
import type { RelayerSubmitter } from './submitter';
import { failpoint } from '../failpoints';
import { publishTransactionRows } from './updates';

export interface PipelineDeps {
  readonly app: TransactionDeps;
  readonly anchors: AnchorService;
  readonly submitter: RelayerSubmitter;
}

/** Thrown when the transaction should be tried again later (a reorg, a node away): the job retries. */
export class RetryLater extends Error {
  override readonly name = 'RetryLater';
}

/** How long a job waits for another process's submitter to carry its call before retrying later. */
const SUBMITTER_WAIT_MS = 120_000;
const SUBMITTER_POLL_MS = 500;

/**
 * Moves one confirmed transaction to a terminal state. Safe to run again at any point after a crash: the
 * owner-signed call is built once and kept; the relayer's batch carrying it is signed once and stored
 * before it is sent, so a rerun finds it on chain or resends the same bytes (which its nonce lets into at
 * most one block); indexing and refunds are guarded by the status under a row lock and by the ledger's
 * one-entry-per-reference rule.
 */
export async function advanceTransaction(deps: PipelineDeps, transactionId: string): Promise<TransactionRow> {
  const { app, anchors, submitter } = deps;
  const found = await findTransaction(app.db, transactionId);
  if (!found) throw new Error(`transaction ${transactionId} does not exist`);
  const ids = { [ATTR.organization]: found.organizationId, [ATTR.transaction]: found.id, [ATTR.network]: found.network };
  trace.getActiveSpan()?.setAttributes(ids); // the job's run (BullMQ's span, in the transaction's trace)
  if (found.status === 'finalized' || found.status === 'failed') return found;

  const tx =
    found.status === 'pending' || found.status === 'submitted'
      ? await inSpan('chain.submit', { attributes: ids }, async (span) => {
          const carried = await untilInBlock(deps, found);
          await describeBatch(app, carried, span);
          return carried;
        })
      : found;
  if (tx.status !== 'in_block') return tx; // failed (refunded) or finalized meanwhile
  failpoint('chain.in_block');

  const canonical = await inSpan('chain.finality', { attributes: { ...ids, [ATTR.blockNumber]: tx.blockNumber! } }, () =>
    anchors.waitFinalized(tx.network, tx.blockNumber!, tx.blockHash!),
  );
  if (!canonical) {
    await submitter.retracted(tx.submissionId!);
    throw new RetryLater('the block was retracted before finality');
  }
  failpoint('chain.finalized');
  await markSubmissionFinalized(app.db, tx.submissionId!);
  // the work's index, the event and its webhook deliveries (enqueued in this span: their jobs carry the trace)
  return inSpan('works.index', { attributes: ids }, () => finalize(app, tx.id));
}

/**
 * Hands the transaction's call to the submitter and waits until it has left its batch (in a block, failed, or
 * finalized by another process meanwhile). The submitter carries the call in its next batch; this job waits for
 * its own call only, not for the rounds that carry later ones. When another process holds the relayer's
 * submitter, its progress shows in the database.
 */
async function untilInBlock(deps: PipelineDeps, from: TransactionRow): Promise<TransactionRow> {
  const { app, submitter } = deps;
  let tx = from;
  const deadline = Date.now() + SUBMITTER_WAIT_MS;
  while (tx.status === 'pending' || tx.status === 'submitted') {
    // built once, kept; built again only when a chain started afresh made it worthless (chain-identity.ts)
    if (!tx.callHex) {
      if (tx.type === 'add_version' && tx.version === null) {
        tx = await step(app, tx, 'preparing_transaction');
        tx = await allocateVersion(app, tx);
        tx = await prepareCall(deps, tx, 'signing');
      } else {
        // nothing to allocate between the two steps (a registration, a version already numbered): the call built,
        // one statement keeps it and enters both
        tx = await prepareCall(deps, tx, 'preparing_transaction', 'signing');
      }
      submitter.readied(tx.network);
    }
    const done = new AbortController();
    try {
      await Promise.race([submitter.drain(tx.network), submitter.moved(tx.id, SUBMITTER_WAIT_MS, done.signal)]);
    } finally {
      done.abort();
    }
    tx = (await findTransaction(app.db, tx.id))!;
    if (tx.status !== 'pending' && tx.status !== 'submitted') break;
    if (Date.now() > deadline) throw new RetryLater('still waiting for the relayer submitter');
    await submitter.moved(tx.id, SUBMITTER_POLL_MS);
  }
  return tx;
}

/** The batch the transaction rode in, on its span (read only when the span is recorded: tracing is on). */
async function describeBatch(app: TransactionDeps, tx: TransactionRow, span: Span): Promise<void> {
  if (!span.isRecording() || !tx.submissionId) return;
  const batch = await findSubmission(app.db, tx.submissionId);
  span.setAttributes({
    [ATTR.submission]: tx.submissionId,
    [ATTR.batchIndex]: tx.batchIndex ?? -1,
    ...(batch && { [ATTR.batchSize]: batch.items, [ATTR.nonce]: batch.nonce, [ATTR.txHash]: batch.txHash }),
    ...(tx.blockNumber !== null && { [ATTR.blockNumber]: tx.blockNumber }),
  });
}

/**
 * Records entering these steps, in order, in one update; returns the row as it now stands. Each step is its own
 * update to live subscribers: the last as the update left it, those before it as the row stood after them (a
 * Redis Cluster keeps them in order: updates.ts `publisherOf`).
 */
async function step(app: TransactionDeps, tx: TransactionRow, ...names: [StepName, ...StepName[]]): Promise<TransactionRow> {
  const stages = stagesOf(tx, names);
  const last = stages.at(-1)!;
  const row = (await updateTransaction(app.db, tx.id, { current_step: last.currentStep, steps: last.steps }, true)) ?? { ...tx, ...last };
  await publishStages(app, row, stages);
  return row;
}

type Stage = Pick<TransactionRow, 'currentStep' | 'steps'>;

/** The row's current step and steps after entering each of these steps in turn. */
function stagesOf(tx: TransactionRow, names: readonly StepName[]): Stage[] {
  const stages: Stage[] = [];
  for (const name of names) stages.push({ currentStep: name, steps: enterStep(stages.at(-1)?.steps ?? tx.steps, name) });
  return stages;
}

/** Each stage to live subscribers, the last as `row` (written with it), those before it as the row stood after them. */
async function publishStages(app: TransactionDeps, row: TransactionRow, stages: readonly Stage[]): Promise<void> {
  await publishTransactionRows(
    app,
    stages.map((stage, i) => (i === stages.length - 1 ? row : { ...row, ...stage })),
  );
}

/**
 * A new version's number: the work's latest + 1, taken only once every earlier version write of the work
 * (by confirm order) has ended. Concurrent updates of one work are thereby serialized and numbered without
 * gaps or duplicates: a version that fails hands its number to the next.
 */
async function allocateVersion(app: TransactionDeps, tx: TransactionRow): Promise<TransactionRow> {
  if (tx.type !== 'add_version' || tx.version !== null) return tx;
  const deadline = Date.now() + SUBMITTER_WAIT_MS;
  for (;;) {
    const allocated = await app.db.transaction(async (trx) => {
      const latest = await lockLatestVersion(trx, tx.workId!);
      if (await earlierVersionUnfinished(trx, tx.workId!, tx.id)) return false;
      await setVersionOnce(trx, tx.id, latest + 1);
      return true;
    });
    if (allocated) return (await findTransaction(app.db, tx.id))!;
    if (Date.now() > deadline) throw new RetryLater('an earlier version of this work is still on its way');
    await delay(SUBMITTER_POLL_MS);
  }
}

/**
 * Builds this transaction's own call, signed inside by the organization's wallet (decrypted just for the
 * signature), and stores it with the steps it enters (`names`, in order; none for the steps as they are), in one
 * statement; the relayer's submitter batches it from there.
 */
export async function prepareCall(
  deps: Pick<PipelineDeps, 'app' | 'anchors'>,
  tx: TransactionRow,
  ...names: StepName[]
): Promise<TransactionRow> {
  const callHex = await buildOwnerCall(deps, tx);
  const stages = stagesOf(tx, names);
  // Only the first build is kept: a concurrent rerun that built one too (and entered the steps) leaves it unused.
  const row = await setCallOnce(deps.app.db, tx.id, callHex, stages.at(-1) ?? tx);
  if (!row) return (await findTransaction(deps.app.db, tx.id))!;
  await publishStages(deps.app, row, stages);
  return row;
}
