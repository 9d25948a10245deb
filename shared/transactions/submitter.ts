import { EventEmitter, once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import type { Knex } from 'knex';
import { withConnection, type PgConnection } from '../db/knex';
import type { TransactionDeps } from './outcomes';
import type { Network } from '../config';
import { AnchorService, ERA_PERIOD, ExhaustsResources, SubmissionRejected, WatchLost } from '../chain/anchors';
import { failpoint } from '../failpoints';
import { hasReadyCall, nextReadyCalls, retractBatchItems, transactionIdsOfBatch } from './repo';
import { markSubmissionRetracted, signedSubmissions, type SubmissionRow } from './submissions-repo';
import { signAndStoreBatch } from './sign-batch';
import { recordInclusion, requeue, type Announce } from './batch-results';
import { publishTransactionUpdates } from './updates';
import { ensureChainIdentity } from './chain-identity';
import { detached } from '../telemetry/tracing';

export type { SubmissionRow } from './submissions-repo';

/** The key of a relayer's PostgreSQL advisory lock (`pg_try_advisory_lock(hashtext(key))`): one submitter per relayer. */
export const relayerLockKey = (network: Network, relayer: string) => `relayer:${network}:${relayer}`;

/** The longest a round waits for a new block before it looks for ready calls again. */
const BLOCK_WAIT_MS = 30_000;

/**
 * The one submitter of a relayer account. Whoever holds the relayer's PostgreSQL advisory lock (one
 * process at a time, however many chain workers run; released by the server if the process dies) owns
 * the nonce: it settles extrinsics signed before a crash, then batches every ready call (status pending,
 * own call built, no batch yet) into one `utility` batch per block, signs it with the next nonce, stores
 * it, and only then sends it.
 */
export class RelayerSubmitter {
  private readonly queued = new Map<Network, Promise<void>>();
  private readonly running = new Map<Network, Promise<void>>();
  /** Emits a transaction's id once this process has moved it on from its batch (in a block, failed or back). */
  private readonly moves = new EventEmitter().setMaxListeners(0);
  /** Emits a network once a call was made ready on it in this process; `readyCount` counts them. */
  private readonly wakes = new EventEmitter().setMaxListeners(0);
  private readonly readyCount = new Map<Network, number>();

  constructor(
    private readonly app: TransactionDeps,
    private readonly anchors: AnchorService,
  ) {}

  /**
   * Submits what is ready on the network, if no other process is doing so. Calls that arrive while a round
   * runs share one follow-up round in this process.
   */
  drain(network: Network): Promise<void> {
    const queued = this.queued.get(network);
    if (queued) return queued;
    const previous = this.running.get(network) ?? Promise.resolve();
    const next = previous
      .catch(() => undefined)
      .then(() => {
        this.queued.delete(network);
        this.running.set(network, next);
        // a round carries the calls of many transactions: it belongs to no one job's trace (each job's own
        // `chain.submit` span shows the batch it rode in)
        return detached(() => this.run(network));
      })
      .finally(() => {
        if (this.running.get(network) === next) this.running.delete(network);
      });
    this.queued.set(network, next);
    return next;
  }

  /**
   * A call of this process was made ready: a round waiting for the next block batches it now, so that a call
   * made ready during block N rides a batch into block N+1, not N+2 (at most one batch per
   * `CHAIN_BATCH_INTERVAL_MS` while calls keep coming, so a block's calls share few extrinsics).
   */
  readied(network: Network): void {
    this.readyCount.set(network, (this.readyCount.get(network) ?? 0) + 1);
    this.wakes.emit(network);
  }

  /** Resolves once no round of this process's submitter is running or queued (their errors are the jobs'). */
  async settle(): Promise<void> {
    while (this.running.size || this.queued.size) {
      await Promise.allSettled([...this.running.values(), ...this.queued.values()]);
    }
    await this.publishing;
  }

  /**
   * Resolves once this process's submitter has moved the transaction on from its batch, after `ms`, or when
   * `signal` aborts, whichever comes first (another process's submitter moves it unseen: look in the database).
   */
  async moved(transactionId: string, ms: number, signal?: AbortSignal): Promise<void> {
    const limit = AbortSignal.timeout(ms);
    await once(this.moves, transactionId, { signal: signal ? AbortSignal.any([limit, signal]) : limit }).catch(() => undefined);
  }

  private announce(transactionIds: readonly string[]): void {
    for (const id of transactionIds) this.moves.emit(id);
  }

  private readonly announcer: Announce = (ids) => this.announce(ids);

  private async run(network: Network): Promise<void> {
    for (;;) {
      const held = await this.withRelayerLock(network, (lock) => this.rounds(network, lock));
      if (!held) return; // another process submits; it looks again for ready calls after releasing the lock
      // A call made ready while we held the lock, whose job then failed to take it, is picked up here. (A batch
      // still on its way is looked for again by the next drain its jobs ask for, not in a loop here.)
      if (!(await hasReadyCall(this.app.db, network))) return;
    }
  }

  /**
   * Runs `fn` holding the relayer's session-level advisory lock on a dedicated connection; false when taken. `fn` is
   * given that connection: what a round reads and signs goes through it, so it never waits for one of the pool (which
   * a burst's chain jobs fill: 0.1 to 0.8 s a round, `docs/performance.md` section 20), and a batch is only ever
   * signed while the lock is held (a lock whose connection dropped fails the round's next statement).
   */
  private async withRelayerLock(network: Network, fn: (lock: PgConnection) => Promise<void>): Promise<boolean> {
    const key = relayerLockKey(network, this.anchors.relayerAddress(network));
    return withConnection(this.app.db, async (connection) => {
      const { rows } = await this.app.db.raw('SELECT pg_try_advisory_lock(hashtext(?)) AS held', [key]).connection(connection);
      if (!rows[0].held) return false;
      try {
        await fn(connection);
      } finally {
        await this.app.db.raw('SELECT pg_advisory_unlock(hashtext(?))', [key]).connection(connection);
      }
      return true;
    });
  }

  /** Live updates of this submitter's batched calls, one after another (each reads its rows as they then stand). */
  private publishing: Promise<void> = Promise.resolve();

  /** `fn` in an SQL transaction on the lock's connection. */
  private async onLock<T>(lock: PgConnection, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    try {
      return await this.app.db.transaction(fn, { connection: lock });
    } finally {
      // knex tags a connection it was lent with the transaction's id and leaves the tag: the connection goes back to the
      // pool untagged, so that statements made on it later are not reported as this transaction's
      delete (lock as { __knexTxId?: string }).__knexTxId;
    }
  }

  private async rounds(network: Network, lock: PgConnection): Promise<void> {
    await ensureChainIdentity(this.app, network, this.anchors.relayerAddress(network), {
      genesis: (await this.anchors.genesisHash(network)).toString('hex'),
      blockHashAt: (height) => this.anchors.blockHashAt(network, height),
    });
    const out = new Set<Promise<void>>();
    const failures: unknown[] = [];
    const track = (sending: Promise<void>) => {
      const tracked: Promise<void> = sending.finally(() => out.delete(tracked));
      out.add(tracked);
    };
    // Batches signed before (by this process, or one that died): looked for, else sent again, alongside the new
    // ones. One that may still land (the node held it) stays on its way without holding the others up: new
    // batches take the nonces it does not hold.
    const onItsWay = (submission: SubmissionRow) => (err: Error) =>
      this.app.log.info(
        { network, submission_id: submission.id, nonce: submission.nonce, reason: err.message },
        'batch still on its way: looked for again later',
      );
    // a watch that ended without news (WatchLost: a dropped connection, a node that lost the bytes) fails nothing: the
    // batch is looked for at once, in this round, and sent again if it is nowhere
    const unlessLost = (submission: SubmissionRow, otherwise: (err: Error) => void) => (err: Error) =>
      err instanceof WatchLost ? this.send(submission, { checkChainFirst: true }).catch(onItsWay(submission)) : otherwise(err);
    for (const submission of await signedSubmissions(this.app.db, network))
      track(this.send(submission, { checkChainFirst: true }).catch(unlessLost(submission, onItsWay(submission))));
    let sentAt = 0;
    try {
      while (!failures.length) {
        const seen = this.readyCount.get(network) ?? 0;
        const ready = await this.onLock(lock, (trx) => nextReadyCalls(trx, network, this.app.config.chainBatchMax));
        if (!ready.length) {
          if (!out.size) break;
          await this.moreToSend(network, seen, sentAt, Promise.race(out));
          continue;
        }
        const count = await this.anchors.fitBatch(
          network,
          ready.map((r) => r.call_hex),
          this.app.config.chainBatchMax,
        );
        const ids = ready.slice(0, count).map((r) => r.id);
        const submission = await this.signBatch(network, lock, ids);
        if (!submission) continue;
        failpoint('chain.batch_signed');
        sentAt = Date.now();
        track(this.send(submission, { checkChainFirst: false }).catch(unlessLost(submission, (err) => void failures.push(err))));
        // the calls' step to live clients, beside the next round, not before it (it took 0.1 to 0.9 s of a burst's
        // rounds); in turn with the earlier ones, so a client never gets an older state after a newer; never throws
        this.publishing = this.publishing.then(() => publishTransactionUpdates(this.app, ids));
        await this.moreToSend(network, seen, sentAt, Promise.all(out));
      }
    } finally {
      await Promise.all(out);
    }
    if (failures.length) throw failures[0];
  }

  /**
   * Waits until there may be more to send: a new block, `landed`, or a call made ready in this process since
   * `seen` (then no sooner than `CHAIN_BATCH_INTERVAL_MS` after the last batch). Calls another process made
   * ready are found at the next block.
   */
  private async moreToSend(network: Network, seen: number, sentAt: number, landed: Promise<unknown>): Promise<void> {
    const stop = new AbortController();
    const woken =
      (this.readyCount.get(network) ?? 0) !== seen
        ? Promise.resolve()
        : once(this.wakes, network, { signal: stop.signal }).then(() => undefined);
    const interval = woken.then(() => delay(Math.max(0, sentAt + this.app.config.chainBatchIntervalMs - Date.now())));
    try {
      await Promise.race([landed, this.anchors.nextBlock(network, BLOCK_WAIT_MS), interval]);
    } finally {
      stop.abort();
    }
  }

  /** Signs and stores the batch on the lock's connection (sign-batch.ts), counted once stored. */
  private async signBatch(network: Network, lock: PgConnection, transactionIds: string[]): Promise<SubmissionRow | undefined> {
    const signedRow = await this.onLock(lock, (trx) =>
      signAndStoreBatch({ app: this.app, anchors: this.anchors }, trx, network, transactionIds),
    );
    // counted once it is stored (a commit that failed signs the batch again)
    if (signedRow) this.app.metrics.chainBatchSize.observe({ network }, signedRow.items);
    return signedRow;
  }

  /**
   * Gets a stored batch into a block: looks for it on chain first when it may have been sent before, else
   * sends it. What the node refuses is the relayer's envelope (nonce, era, fees, pool), never the calls
   * inside: once the bytes are not in a block and cannot be (refused by the pool, era over, nonce taken),
   * its calls go out again in a new batch (see `requeue`). Bytes the pool may still hold are looked for later.
   */
  private async send(submission: SubmissionRow, { checkChainFirst }: { checkChainFirst: boolean }): Promise<void> {
    const { network } = submission;
    let inclusion = checkChainFirst ? await this.anchors.find(network, submission.txHash, submission.signedAtBlock) : undefined;
    if (!inclusion) {
      try {
        inclusion = await this.anchors.submit(network, {
          hex: submission.extrinsicHex,
          hash: submission.txHash,
          signedAtBlock: submission.signedAtBlock,
        });
      } catch (err) {
        // too large for the node: the next batches are cut at once, before anything more is asked of it
        const most = err instanceof ExhaustsResources ? await this.anchors.refusedAsTooLarge(network, submission.extrinsicHex) : 0;
        // Read the finalized head and the relayer's nonce in its state first, then look for the bytes: if they are not
        // in a block now, a finalized height past the era or a finalized nonce past ours means no fork can carry them.
        const { number: finalized, hash: finalizedHash } = await this.anchors.finalizedHead(network);
        const chainNonce = await this.anchors.onChainNonce(network, finalizedHash);
        inclusion = await this.anchors.find(network, submission.txHash, submission.signedAtBlock, finalized);
        if (!inclusion) {
          const reason = (err as Error).message;
          if (finalized >= submission.signedAtBlock + ERA_PERIOD)
            return requeue(this.app, this.announcer, submission, 'expired', `its era ended unincluded (${reason})`);
          if (chainNonce > submission.nonce)
            return requeue(this.app, this.announcer, submission, 'expired', `its nonce went to another extrinsic (${reason})`);
          // refused as they were sent: the node holds no copy, the bytes can only land if sent again, and won't be
          if (err instanceof SubmissionRejected && !err.mayStillLand) {
            return requeue(
              this.app,
              this.announcer,
              submission,
              'rejected',
              most ? `${reason}; batches of its kind now carry at most ${most} calls` : reason,
            );
          }
          // the connection went, the node held the bytes, or their watch ended without news (WatchLost, sent again at
          // once by the round): they may land yet; signed afresh only once their era ended or their nonce went
          throw err;
        }
      }
    }
    await recordInclusion(this.app, this.announcer, submission, inclusion);
  }

  /**
   * A retracted block: the batch and its items go back to "signed" / "submitted", so the next round looks
   * for it on the canonical chain before sending the same bytes again.
   */
  async retracted(submissionId: string): Promise<void> {
    await this.app.db.transaction(async (trx) => {
      await markSubmissionRetracted(trx, submissionId);
      await retractBatchItems(trx, submissionId);
    });
    const touched = await transactionIdsOfBatch(this.app.db, submissionId);
    this.announce(touched);
    await publishTransactionUpdates(this.app, touched);
  }
}
