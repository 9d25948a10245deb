import type { Knex } from 'knex';
import type { Network } from '../config';
import type { Step, TransactionStatus } from './steps';
import { insertRow, isKnexExpression, prepared, preparedUpdate, updateRows } from '../db/knex';
import { ROW_COLUMNS, toTransaction, type ActivityRow, type NewTransactionRow, type OpenTransactionCount } from './row';
import type { StuckTransaction, TransactionCount, TransactionRow } from './row';

export { toTransaction, type ActivityRow, type NewTransactionRow, type TransactionCount, type TransactionRow } from './row';

type Db = Knex | Knex.Transaction;
type Columns = Record<string, unknown>;

// Read at every step of every registration: prepared once per connection (db/knex.ts `prepared`), their columns named.
const ROW = ROW_COLUMNS.map((c) => `"${c}"`).join(', ');
const FIND = `SELECT ${ROW} FROM transactions WHERE id = $1`;
const FIND_MANY = `SELECT ${ROW} FROM transactions WHERE id = ANY($1::uuid[]) ORDER BY id`;

/** One transaction, by id (locked to the caller's SQL transaction with `forUpdate`). */
export async function findTransaction(db: Db, id: string, options: { forUpdate?: boolean } = {}): Promise<TransactionRow | undefined> {
  const [name, text] = options.forUpdate ? ['transactions_find_locked', `${FIND} FOR UPDATE`] : ['transactions_find', FIND];
  const { rows } = await prepared(db, name, text, [id]);
  return rows[0] ? toTransaction(rows[0]) : undefined;
}

/** The transaction a job was confirmed into, if it was (one per job id). */
export async function transactionIdForJob(db: Db, jobId: string): Promise<string | undefined> {
  const row = await db('transactions').where({ job_id: jobId }).first('id');
  return row?.id;
}

/** Changes columns (snake_case) of one transaction, and its `updated_at`; with `returning`, the row as it now stands. */
export async function updateTransaction(db: Db, id: string, changes: Columns, returning = false): Promise<TransactionRow | undefined> {
  // an undefined value leaves its column as it is (as knex did); steps, and a result, go as JSON (an array would not)
  const columns = Object.keys(changes).filter((column) => changes[column] !== undefined);
  const values = columns.map((column) => {
    const value = changes[column];
    if (isKnexExpression(value)) throw new Error(`updateTransaction takes values, not SQL (${column})`);
    return column === 'steps' || (column === 'result' && value !== null) ? JSON.stringify(value) : value;
  });
  const { name, text } = preparedUpdate('transactions', columns, returning ? ROW : 'id');
  const { rows } = await prepared(db, name, text, [id, ...values]);
  return returning && rows[0] ? toTransaction(rows[0]) : undefined;
}

/** Changes the same columns of many transactions (each row's id first; JSON as values) in one statement; those rows now. */
export async function updateTransactions(db: Db, rows: readonly Columns[]): Promise<TransactionRow[]> {
  return (await updateRows(db, 'transactions', rows, ROW_COLUMNS)).map(toTransaction);
}

/* What the pipeline and the relayer's submitter read and write of transactions. */

function readyCalls(db: Db, network: Network) {
  return db('transactions')
    .where({ network, status: 'pending' })
    .whereNotNull('call_hex')
    .whereNull('submission_id')
    .where((q) => q.whereNull('submit_after').orWhere('submit_after', '<=', db.fn.now()));
}

/** Whether a call of the network waits for a batch (status pending, own call built, none carrying it, due). */
export async function hasReadyCall(db: Db, network: Network): Promise<boolean> {
  return Boolean(await readyCalls(db, network).first('id'));
}

/** The network's calls waiting for a batch, oldest first. */
export async function nextReadyCalls(db: Db, network: Network, limit: number): Promise<{ id: string; call_hex: string }[]> {
  return readyCalls(db, network).orderBy('created_at').limit(limit).select('id', 'call_hex');
}

/** Those of these transactions still waiting for a batch, locked, in confirm order. */
export async function lockUnbatched(
  trx: Knex.Transaction,
  ids: readonly string[],
): Promise<{ id: string; call_hex: string; steps: Step[]; signings: number }[]> {
  return trx('transactions')
    .whereIn('id', ids)
    .where({ status: 'pending' })
    .whereNull('submission_id')
    .forUpdate()
    .orderBy('created_at')
    .select('id', 'call_hex', 'steps', 'signings');
}

/** The items of a batch just signed and stored: submitted, in the submission, each at its index with its own steps, in one statement. */
export async function markBatched(
  trx: Knex.Transaction,
  submission: { readonly id: string; readonly txHash: string },
  items: readonly { readonly id: string; readonly steps: readonly Step[] }[],
): Promise<void> {
  await trx.raw(
    `UPDATE transactions AS t
        SET status = 'submitted', current_step = 'submitting', steps = v.steps, submission_id = ?, batch_index = v.position - 1,
            tx_hash = ?, signings = t.signings + 1, updated_at = now()
       FROM unnest(?::uuid[], ?::jsonb[]) WITH ORDINALITY AS v(id, steps, position)
      WHERE t.id = v.id`,
    [submission.id, submission.txHash, items.map((i) => i.id), items.map((i) => JSON.stringify(i.steps))],
  );
}

/** The items of a batch that ran in its block: in block, each with its own steps and what the chain assigned it. */
export async function markInBlock(
  trx: Knex.Transaction,
  block: { readonly blockHash: string; readonly blockNumber: number; readonly index: number },
  items: readonly { readonly id: string; readonly steps: readonly Step[]; readonly atsId?: string; readonly version?: number }[],
): Promise<void> {
  if (!items.length) return;
  await trx.raw(
    `UPDATE transactions AS t
        SET status = 'in_block', current_step = 'confirming', steps = v.steps, block_hash = ?, block_number = ?, extrinsic_index = ?,
            ats_id = coalesce(v.ats_id, t.ats_id), version = coalesce(v.version, t.version), updated_at = now()
       FROM unnest(?::uuid[], ?::jsonb[], ?::bigint[], ?::int[]) AS v(id, steps, ats_id, version)
      WHERE t.id = v.id`,
    [
      block.blockHash,
      block.blockNumber,
      block.index,
      items.map((i) => i.id),
      items.map((i) => JSON.stringify(i.steps)),
      // arrays with nulls (no assignment): pg sends them as such, knex's binding type does not list them
      items.map((i) => i.atsId ?? null) as unknown as string[],
      items.map((i) => i.version ?? null) as unknown as number[],
    ],
  );
}

/** The items of a batch, locked, in batch order. */
export async function lockBatchItems(
  trx: Knex.Transaction,
  submissionId: string,
): Promise<{ id: string; status: TransactionStatus; steps: Step[]; signings: number; batch_index: number; created_at: Date }[]> {
  return trx('transactions')
    .where({ submission_id: submissionId })
    .orderBy('batch_index')
    .forUpdate()
    .select('id', 'status', 'steps', 'signings', 'batch_index', 'created_at');
}

export const transactionIdsOfBatch = (db: Db, submissionId: string): Promise<string[]> =>
  db('transactions').where({ submission_id: submissionId }).pluck('id');

/** A retracted block: its items go back to "submitted". */
export async function retractBatchItems(db: Db, submissionId: string): Promise<void> {
  await db('transactions')
    .where({ submission_id: submissionId, status: 'in_block' })
    .update({ status: 'submitted', block_hash: null, block_number: null, extrinsic_index: null, updated_at: db.fn.now() });
}

/** Takes a call out of its batch so a later round carries it, `afterSeconds` from now at the earliest. */
export async function detachFromBatch(db: Db, id: string, afterSeconds = 0): Promise<void> {
  await db('transactions')
    .where({ id })
    .update({
      status: 'pending',
      submission_id: null,
      batch_index: null,
      tx_hash: null,
      submit_after: afterSeconds ? db.raw(`now() + make_interval(secs => ?)`, [afterSeconds]) : null,
      updated_at: db.fn.now(),
    });
}

/** The owner nonces the organization's calls in the given batches (a subquery of their ids) were signed over. */
export async function ownerNoncesIn(db: Db, organizationId: string, network: Network, submissionIds: Knex.QueryBuilder): Promise<bigint[]> {
  const nonces = await db('transactions')
    .where({ organization_id: organizationId, network })
    .whereIn('submission_id', submissionIds)
    .whereNotNull('owner_nonce')
    .pluck('owner_nonce');
  return nonces.map((n: string) => BigInt(n));
}

export async function setOwnerCall(db: Db, id: string, callHex: string, ownerNonce: bigint): Promise<void> {
  await db('transactions').where({ id }).update({ call_hex: callHex, owner_nonce: ownerNonce.toString() });
}

/** Keeps the first call built only, with the steps entered along with it: the row so, or nothing when a call was kept (a rerun's). */
export async function setCallOnce(db: Db, id: string, callHex: string, entered: Pick<TransactionRow, 'currentStep' | 'steps'>) {
  const text = `UPDATE transactions SET call_hex = $2, current_step = $3, steps = $4, updated_at = now() WHERE id = $1 AND call_hex IS NULL RETURNING ${ROW}`;
  const values = [id, callHex, entered.currentStep, JSON.stringify(entered.steps)];
  const { rows } = await prepared(db, 'transactions_set_call_and_steps', text, values);
  return rows[0] ? toTransaction(rows[0]) : undefined;
}

/** Whether a version write of the work confirmed before this one has not ended yet. */
export async function earlierVersionUnfinished(db: Db, workId: string, transactionId: string): Promise<boolean> {
  const ahead = await db('transactions')
    .where({ work_id: workId, type: 'add_version' })
    .whereIn('status', ['pending', 'submitted', 'in_block'])
    // compared in SQL: created_at has microseconds a JavaScript Date would drop
    .whereRaw('(created_at, id) < (SELECT created_at, id FROM transactions WHERE id = ?)', [transactionId])
    .first('id');
  return Boolean(ahead);
}

export const setVersionOnce = (db: Db, id: string, version: number) =>
  db('transactions').where({ id }).whereNull('version').update({ version });

/** Every unfinished transaction of the network starts its way again, its call to be built anew; their count. */
export async function restartUnfinished(db: Db, network: Network): Promise<number> {
  const ids = await db('transactions')
    .where({ network })
    .whereIn('status', ['pending', 'submitted', 'in_block'])
    .update({
      status: 'pending',
      call_hex: null,
      submission_id: null,
      batch_index: null,
      tx_hash: null,
      block_hash: null,
      block_number: null,
      extrinsic_index: null,
      submit_after: null,
      updated_at: db.fn.now(),
    })
    .returning('id');
  return ids.length;
}

export async function insertTransaction(trx: Knex.Transaction, row: NewTransactionRow): Promise<TransactionRow> {
  const columns = {
    id: row.id,
    job_id: row.jobId,
    organization_id: row.organizationId,
    api_key_id: row.apiKeyId,
    network: row.network,
    type: row.type,
    status: 'pending',
    current_step: row.steps[row.steps.length - 1]!.name,
    steps: JSON.stringify(row.steps),
    anchor: JSON.stringify(row.anchor),
    price_credits: row.priceCredits,
    ats_id: row.atsId,
    work_id: row.workId,
    external_user_ref: row.externalUserRef,
    traceparent: row.traceparent,
  };
  return toTransaction((await insertRow(trx, 'transactions', columns, ROW))[0]);
}

/** These transactions, in one statement, in id order (unknown ids left out); locked in that order with `forUpdate`. */
export async function findTransactions(db: Db, ids: readonly string[], options: { forUpdate?: boolean } = {}): Promise<TransactionRow[]> {
  if (!ids.length) return [];
  const [name, lock] = options.forUpdate ? ['transactions_find_many_locked', ' FOR UPDATE'] : ['transactions_find_many', ''];
  return (await prepared(db, name, FIND_MANY + lock, [[...new Set(ids)]])).rows.map(toTransaction);
}

/** Of these job ids, those confirmed into a transaction. */
export async function confirmedJobIds(db: Knex, jobIds: readonly string[]): Promise<Set<string>> {
  if (!jobIds.length) return new Set();
  return new Set((await db('transactions').whereIn('job_id', jobIds).pluck('job_id')) as string[]);
}

/** Unfinished transactions untouched for `idleSeconds`, the longest idle first, with their jobs' labels and trace. */
export async function idleUnfinished(db: Knex, idleSeconds: number, limit: number): Promise<StuckTransaction[]> {
  return db('transactions')
    .whereIn('status', ['pending', 'submitted', 'in_block'] satisfies TransactionStatus[])
    .where('updated_at', '<', db.raw(`now() - make_interval(secs => ?)`, [idleSeconds]))
    .orderBy('updated_at')
    .limit(limit)
    .select('id as transactionId', 'organization_id as organizationId', 'type', 'network', 'traceparent');
}

/** The explorer link finalization announced for a transaction (its result), if any. */
export async function announcedExplorerUrl(db: Knex, transactionId: string): Promise<string | undefined> {
  const row = await db('transactions').where({ id: transactionId }).first(db.raw("result->>'explorer_url' AS url"));
  return row?.url || undefined;
}

/* Support reads (the operator CLI): an organization's window, by (organization_id, created_at). */

const confirmedSince = (db: Knex, organizationId: string, since: Date) =>
  db('transactions').where({ organization_id: organizationId }).where('created_at', '>=', since);

/** The organization's transactions confirmed since `since`, newest first, at most `limit`. */
export async function transactionsSince(db: Knex, organizationId: string, since: Date, limit: number): Promise<ActivityRow[]> {
  const columns = 'id, type, network, status, current_step, ats_id, version, result, external_user_ref, created_at, finalized_at';
  const rows = await confirmedSince(db, organizationId, since).orderByRaw('created_at DESC, id DESC').limit(limit).select(db.raw(columns));
  return rows.map(toTransaction);
}

/** How many of the organization's transactions confirmed since `since` there are of each type and status (failed: by reason). */
export async function transactionCountsSince(db: Knex, organizationId: string, since: Date): Promise<TransactionCount[]> {
  return confirmedSince(db, organizationId, since)
    .groupByRaw('1, 2, 3')
    .select('type', 'status', db.raw(`result->'error'->>'code' AS reason`), db.raw('count(*)::int AS count'));
}

/** Per network and status, the transactions not yet terminal: how many, and the oldest's age in seconds (by the database's clock). */
export async function openTransactionCounts(db: Knex): Promise<OpenTransactionCount[]> {
  const rows = await db('transactions')
    .whereIn('status', ['pending', 'submitted', 'in_block'] satisfies TransactionStatus[])
    .groupBy('network', 'status')
    .select('network', 'status', db.raw('count(*)::int AS count'), db.raw('extract(epoch FROM now() - min(created_at))::float8 AS age'));
  return rows.map((r: { network: Network; status: TransactionStatus; count: number; age: number }) => ({
    network: r.network,
    status: r.status,
    count: r.count,
    oldestAgeSeconds: Math.max(0, r.age),
  }));
}
