import { EventEmitter, once } from 'node:events';
import type { Knex } from 'knex';
import { withConnection } from '../db/knex';
import type { AppContext } from '../context';
import type { Network } from '../config';
import { AnchorService, ERA_PERIOD, SubmissionRejected, type Inclusion } from '../chain/anchors';
import { deliverAfterCommit, failWithin } from './outcomes';
import { findTransaction, updateTransaction } from './repo';
import { buildOwnerCall } from './pipeline';
import { allocateNonces } from '../chain/nonces';
import { INVALID_NONCE_ERROR } from '../chain/dialects/ats';
import { failpoint } from '../failpoints';
import { enterStep } from './steps';
import { publishTransactionUpdates } from './updates';
import { ensureChainIdentity } from './chain-identity';

export interface SubmissionRow {
  readonly id: string;
  readonly network: Network;
  readonly relayer: string;
  readonly nonce: number;
  readonly extrinsicHex: string;
  readonly txHash: string;
  readonly signedAtBlock: number;
  readonly status: 'signed' | 'in_block' | 'finalized' | 'expired' | 'rejected';
}

const toSubmission = (r: Record<string, any>): SubmissionRow => ({
  id: r.id,
  network: r.network,
  relayer: r.relayer,
  nonce: Number(r.nonce),
  extrinsicHex: r.extrinsic_hex,
  txHash: r.tx_hash,
  signedAtBlock: r.signed_at_block,
  status: r.status,
});

/** The longest a round waits for a new block before it looks for ready calls again. */
const BLOCK_WAIT_MS = 30_000;

/** The longest wait before a call refused with its relayer extrinsic is signed again (it doubles from 1 s). */
const MAX_RESEND_BACKOFF_S = 60;

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

  constructor(
    private readonly app: AppContext,
    private readonly anchors: AnchorService,
  ) {}

  /**
   * `ats`: signs each call again over the owner nonce it must carry, in batch order (nonces.ts), under
   * the relayer's lock like the relayer's nonce. Returns the calls to batch.
   */
  private async withOwnerNonces(trx: Knex.Transaction, network: Network, items: readonly { id: string; call_hex: string }[]): Promise<string[]> {
    const owners = await trx('transactions as t')
      .join('wallets as w', (j) => j.on('w.organization_id', 't.organization_id').andOn('w.network', 't.network'))
      .whereIn('t.id', items.map((i) => i.id))
      .select('t.id', 't.organization_id', 'w.public_key');
    const ownerOf = new Map(owners.map((o) => [o.id as string, o]));
    const calls = new Map<string, string>();
    for (const organizationId of new Set(owners.map((o) => o.organization_id as string))) {
      const mine = items.filter((i) => ownerOf.get(i.id)?.organization_id === organizationId);
      const publicKey = String(ownerOf.get(mine[0]!.id)!.public_key).replace(/^0x/, '');
      const chainNonce = await this.anchors.ownerNonce(network, Buffer.from(publicKey, 'hex'));
      const onTheirWay = await trx('transactions as t')
        .join('chain_submissions as s', 's.id', 't.submission_id')
        .where({ 't.organization_id': organizationId, 't.network': network, 's.status': 'signed' })
        .whereNotNull('t.owner_nonce')
        .pluck('t.owner_nonce');
      const { nonces, doomed } = allocateNonces(chainNonce, onTheirWay.map((n: string) => BigInt(n)), mine.length);
      if (doomed.length) this.app.log.info({ network, organization_id: organizationId, doomed: doomed.map(String) }, 'owner calls on their way past a hole: signed again once they fail');
      for (const [k, item] of mine.entries()) {
        const tx = (await findTransaction(trx, item.id))!;
        const hex = await buildOwnerCall({ app: this.app, anchors: this.anchors }, tx, nonces[k]!);
        await trx('transactions').where({ id: item.id }).update({ call_hex: hex, owner_nonce: nonces[k]!.toString() });
        calls.set(item.id, hex);
      }
    }
    return items.map((i) => calls.get(i.id) ?? i.call_hex);
  }

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
        return this.run(network);
      })
      .finally(() => {
        if (this.running.get(network) === next) this.running.delete(network);
      });
    this.queued.set(network, next);
    return next;
  }

  /** Resolves once no round of this process's submitter is running or queued (their errors are the jobs'). */
  async settle(): Promise<void> {
    while (this.running.size || this.queued.size) {
      await Promise.allSettled([...this.running.values(), ...this.queued.values()]);
    }
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

  private async run(network: Network): Promise<void> {
    for (;;) {
      const held = await this.withRelayerLock(network, () => this.rounds(network));
      if (!held) return; // another process submits; it looks again for ready calls after releasing the lock
      // A call made ready while we held the lock, whose job then failed to take it, is picked up here. (A batch
      // still on its way is looked for again by the next drain its jobs ask for, not in a loop here.)
      if (!(await this.readyQuery(network).first('id'))) return;
    }
  }

  private readyQuery(network: Network) {
    return this.app.db('transactions')
      .where({ network, status: 'pending' })
      .whereNotNull('call_hex')
      .whereNull('submission_id')
      .where((q) => q.whereNull('submit_after').orWhere('submit_after', '<=', this.app.db.fn.now()));
  }

  /** Runs `fn` holding the relayer's session-level advisory lock on a dedicated connection; false when taken. */
  private async withRelayerLock(network: Network, fn: () => Promise<void>): Promise<boolean> {
    const key = `relayer:${network}:${this.anchors.relayerAddress(network)}`;
    return withConnection(this.app.db, async (connection) => {
      const { rows } = await this.app.db.raw('SELECT pg_try_advisory_lock(hashtext(?)) AS held', [key]).connection(connection);
      if (!rows[0].held) return false;
      try {
        await fn();
      } finally {
        await this.app.db.raw('SELECT pg_advisory_unlock(hashtext(?))', [key]).connection(connection);
      }
      return true;
    });
  }

  private async rounds(network: Network): Promise<void> {
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
    const outstanding = await this.app.db('chain_submissions').where({ network, status: 'signed' }).orderBy('nonce');
    for (const row of outstanding) {
      track(
        this.send(toSubmission(row), { checkChainFirst: true }).catch((err: Error) =>
          this.app.log.info({ network, submission_id: row.id, nonce: Number(row.nonce), reason: err.message }, 'batch still on its way: looked for again later'),
        ),
      );
    }
    try {
      while (!failures.length) {
        const ready = await this.readyQuery(network).orderBy('created_at').limit(this.app.config.chainBatchMax).select('id', 'call_hex');
        if (!ready.length) {
          if (!out.size) break;
          await Promise.race([...out, this.anchors.nextBlock(network, BLOCK_WAIT_MS)]);
          continue;
        }
        const count = await this.anchors.fitBatch(network, ready.map((r) => r.call_hex as string), this.app.config.chainBatchMax);
        const submission = await this.signBatch(network, ready.slice(0, count).map((r) => r.id as string));
        if (!submission) continue;
        await publishTransactionUpdates(this.app, ready.slice(0, count).map((r) => r.id as string));
        failpoint('chain.batch_signed');
        track(this.send(submission, { checkChainFirst: false }).catch((err: unknown) => void failures.push(err)));
        await Promise.race([Promise.all(out), this.anchors.nextBlock(network, BLOCK_WAIT_MS)]);
      }
    } finally {
      await Promise.all(out);
    }
    if (failures.length) throw failures[0];
  }

  /**
   * Allocates the nonce, signs the batch and stores it with its items, all before anything is sent. The
   * chain is the truth for the nonce: the relayer's next index (its pool counted) or, past it, the first that
   * none of this relayer's own batches on their way holds; never a number remembered from before (a restored
   * backup, a chain started afresh, a relayer used by something else would all make it wrong).
   */
  private async signBatch(network: Network, transactionIds: string[]): Promise<SubmissionRow | undefined> {
    const { db } = this.app;
    const relayer = this.anchors.relayerAddress(network);
    const genesis = (await this.anchors.genesisHash(network)).toString('hex');
    const chainNonce = await this.anchors.nextRelayerNonce(network);
    return db.transaction(async (trx) => {
      const items = await trx('transactions').whereIn('id', transactionIds).where({ status: 'pending' }).whereNull('submission_id').forUpdate().orderBy('created_at').select('id', 'call_hex', 'steps', 'signings');
      if (!items.length) return undefined;
      await trx.raw(`INSERT INTO relayer_nonces (network, address, next_nonce) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, [network, relayer, chainNonce]);
      await trx('relayer_nonces').where({ network, address: relayer }).forUpdate().first('next_nonce');
      // the first nonce from the chain's that no batch on its way holds (a batch given up leaves a hole to fill)
      const onTheirWay = await trx('chain_submissions').where({ network, relayer, status: 'signed' }).pluck('nonce');
      const nonce = Number(allocateNonces(BigInt(chainNonce), onTheirWay.map((n: string) => BigInt(n)), 1).nonces[0]);
      const callHexes = (await this.anchors.dialect(network)) === 'ats' ? await this.withOwnerNonces(trx, network, items) : items.map((i) => i.call_hex as string);
      const signed = await this.anchors.signBatch(network, callHexes, nonce);
      await trx('relayer_nonces').where({ network, address: relayer }).update({ next_nonce: nonce + 1 });
      const [row] = await trx('chain_submissions')
        .insert({ network, relayer, nonce, genesis_hash: genesis, extrinsic_hex: signed.hex, tx_hash: signed.hash, signed_at_block: signed.signedAtBlock, items: items.length })
        .returning('*');
      for (const [index, item] of items.entries()) {
        await updateTransaction(trx, item.id, {
          status: 'submitted',
          current_step: 'submitting',
          steps: enterStep(item.steps, 'submitting'),
          submission_id: row.id,
          batch_index: index,
          tx_hash: signed.hash,
          signings: Number(item.signings) + 1,
        });
      }
      this.app.log.info({ network, submission_id: row.id, nonce, items: items.length, tx_hash: signed.hash }, 'batch signed');
      return toSubmission(row);
    });
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
        inclusion = await this.anchors.submit(network, submission.extrinsicHex);
      } catch (err) {
        // Read the chain's height and the relayer's nonce first, then look for the bytes: if they are not in
        // a block now, a height past the era or a nonce past ours means they never will be.
        const best = await this.anchors.bestBlockNumber(network);
        const chainNonce = await this.anchors.onChainNonce(network);
        inclusion = await this.anchors.find(network, submission.txHash, submission.signedAtBlock);
        if (!inclusion) {
          const reason = (err as Error).message;
          if (best >= submission.signedAtBlock + ERA_PERIOD) return this.requeue(submission, 'expired', `its era ended unincluded (${reason})`);
          if (chainNonce > submission.nonce) return this.requeue(submission, 'expired', `its nonce went to another extrinsic (${reason})`, { nonceUsed: true });
          // refused as they were sent: the node holds no copy, the bytes can only land if sent again, and won't be
          if (err instanceof SubmissionRejected && !err.mayStillLand) return this.requeue(submission, 'rejected', reason);
          // the connection went, or the node held the bytes: they may land yet; looked for (and sent) again later,
          // signed afresh only once their era ended or their nonce went to another extrinsic
          throw err;
        }
      }
    }
    await this.recordInclusion(submission, inclusion);
  }

  /** Every item's outcome, from its own events: included, failed alone (refunded), or back to be batched. */
  private async recordInclusion(submission: SubmissionRow, inclusion: Inclusion): Promise<void> {
    const touched: string[] = [];
    const deliveries = await this.app.db.transaction(async (trx) => {
      await trx('chain_submissions').where({ id: submission.id }).update({
        status: 'in_block',
        block_hash: inclusion.blockHash,
        block_number: inclusion.blockNumber,
        extrinsic_index: inclusion.index,
        updated_at: trx.fn.now(),
      });
      const items = await this.items(trx, submission.id);
      touched.push(...items.map((i) => i.id as string));
      const out: (string | null)[] = [];
      for (const item of items) {
        const outcome = inclusion.items[item.batch_index];
        if (item.status === 'finalized' || item.status === 'failed') continue;
        if (outcome?.status === 'ok') {
          await updateTransaction(trx, item.id, {
            status: 'in_block',
            current_step: 'confirming',
            steps: enterStep(item.steps, 'confirming'),
            block_hash: inclusion.blockHash,
            block_number: inclusion.blockNumber,
            extrinsic_index: inclusion.index,
            ...(outcome.assignment.atsId !== undefined ? { ats_id: outcome.assignment.atsId.toString() } : {}),
            ...(outcome.assignment.version !== undefined ? { version: outcome.assignment.version } : {}),
          });
        } else if (outcome?.status === 'not_run' || outcome?.error === INVALID_NONCE_ERROR) {
          // never ran, or (`ats`) signed over an owner nonce a dropped call before it left a hole at: passing
          await detach(trx, item.id);
        } else {
          const error = outcome?.error ?? inclusion.error ?? 'unknown error';
          out.push(await failWithin(trx, this.app, item.id, 'chain.extrinsic_failed', `The transaction failed on chain: ${error}`));
        }
      }
      return out;
    });
    this.announce(touched);
    for (const delivery of deliveries) await deliverAfterCommit(this.app, delivery);
    await publishTransactionUpdates(this.app, touched);
    this.app.log.info({ network: submission.network, submission_id: submission.id, block: inclusion.blockNumber, ok: inclusion.items.filter((i) => i.status === 'ok').length, items: inclusion.items.length }, 'batch in block');
  }

  /**
   * The batch can never be included: hand its nonce back if unused, and send its calls out again in a new
   * batch, signed afresh with the chain's nonce and a new era, after a backoff (none after an expiry), for
   * as long as CHAIN_GIVE_UP_AFTER allows since confirm; past that, fail them (refunded).
   */
  private async requeue(submission: SubmissionRow, status: 'expired' | 'rejected', reason: string, { nonceUsed = false } = {}): Promise<void> {
    const touched: string[] = [];
    const giveUpAfter = this.app.config.chainGiveUpAfterSeconds;
    const deliveries = await this.app.db.transaction(async (trx) => {
      await trx('chain_submissions').where({ id: submission.id }).update({ status, updated_at: trx.fn.now() });
      // an unused nonce goes back, so later batches are not stuck behind a gap
      if (!nonceUsed) {
        await trx('relayer_nonces')
          .where({ network: submission.network, address: submission.relayer })
          .where('next_nonce', '>', submission.nonce)
          .update({ next_nonce: submission.nonce });
      }
      const out: (string | null)[] = [];
      for (const item of await this.items(trx, submission.id)) {
        touched.push(item.id);
        if (Date.now() - new Date(item.created_at).getTime() < giveUpAfter * 1000) {
          const backoff = status === 'expired' ? 0 : Math.min(MAX_RESEND_BACKOFF_S, 2 ** Math.max(0, Number(item.signings) - 1));
          await detach(trx, item.id, backoff);
        } else {
          const code = status === 'expired' ? 'chain.expired' : 'chain.submission_rejected';
          out.push(await failWithin(trx, this.app, item.id, code, `The chain did not take the transaction within ${giveUpAfter} s: ${reason}`));
        }
      }
      return out;
    });
    this.announce(touched);
    for (const delivery of deliveries) await deliverAfterCommit(this.app, delivery);
    await publishTransactionUpdates(this.app, touched);
    this.app.log.warn({ network: submission.network, submission_id: submission.id, nonce: submission.nonce, status, reason }, 'batch not taken: its calls go out again');
  }

  private items(trx: Knex.Transaction, submissionId: string) {
    return trx('transactions').where({ submission_id: submissionId }).orderBy('batch_index').forUpdate().select('id', 'status', 'steps', 'signings', 'batch_index', 'created_at');
  }

  /**
   * A retracted block: the batch and its items go back to "signed" / "submitted", so the next round looks
   * for it on the canonical chain before sending the same bytes again.
   */
  async retracted(submissionId: string): Promise<void> {
    await this.app.db.transaction(async (trx) => {
      await trx('chain_submissions').where({ id: submissionId, status: 'in_block' }).update({ status: 'signed', block_hash: null, block_number: null, extrinsic_index: null, updated_at: trx.fn.now() });
      await trx('transactions')
        .where({ submission_id: submissionId, status: 'in_block' })
        .update({ status: 'submitted', block_hash: null, block_number: null, extrinsic_index: null, updated_at: trx.fn.now() });
    });
    const touched = await this.app.db('transactions').where({ submission_id: submissionId }).pluck('id');
    this.announce(touched);
    await publishTransactionUpdates(this.app, touched);
  }
}

/** Takes a call out of its batch so a later round carries it, `afterSeconds` from now at the earliest. */
async function detach(trx: Knex.Transaction, transactionId: string, afterSeconds = 0): Promise<void> {
  await updateTransaction(trx, transactionId, {
    status: 'pending',
    submission_id: null,
    batch_index: null,
    tx_hash: null,
    submit_after: afterSeconds ? trx.raw(`now() + make_interval(secs => ?)`, [afterSeconds]) : null,
  });
}
