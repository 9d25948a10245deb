import type { Knex } from 'knex';
import { insertManyText, insertRows, prepared, rowsParameter } from '../db/knex';
import type { Network } from '../config';
import type { Cursor } from './cursor';
import type { Creator, WorkRecord, WorkScope, WorkVersionRecord } from './types';

export const toWork = (r: Record<string, any>): WorkRecord => ({
  id: r.id,
  organizationId: r.organization_id,
  network: r.network,
  atsId: Number(r.ats_id),
  owner: r.owner,
  title: r.title,
  assetFilename: r.asset_filename,
  latestVersion: Number(r.latest_version),
  latestCommitment: r.latest_commitment,
  externalUserRef: r.external_user_ref,
  hasFiles: r.has_files,
  createdAt: r.created_at,
  latestVersionAt: r.latest_version_at,
});

export const toVersion = (r: Record<string, any>): WorkVersionRecord => ({
  workId: r.work_id,
  version: Number(r.version),
  transactionId: r.transaction_id,
  commitment: r.commitment,
  mediaHash: r.media_hash,
  merkleRoot: r.merkle_root,
  title: r.title,
  filename: r.filename,
  creators: r.creators,
  audioKey: r.audio_key,
  audioSize: Number(r.audio_size),
  txHash: r.tx_hash,
  blockNumber: Number(r.block_number),
  blockHash: r.block_hash,
  extrinsicIndex: Number(r.extrinsic_index),
  finalizedAt: r.finalized_at,
});

export interface ListFilter extends WorkScope {
  readonly network?: Network;
}

/** created_at with its microseconds, in the form cursors carry. */
const CURSOR_AT = `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

function scoped(db: Knex, filter: ListFilter): Knex.QueryBuilder {
  const query = db('works').where({ organization_id: filter.organizationId });
  if (filter.network) query.andWhere({ network: filter.network });
  if (filter.externalUserRef !== undefined) query.andWhere({ external_user_ref: filter.externalUserRef });
  return query;
}

export interface WorksPageRows {
  readonly works: (WorkRecord & { readonly cursor: Cursor })[];
  readonly hasNextPage: boolean;
  readonly hasPreviousPage: boolean;
  /** The works under the filter, in the same snapshot as the page. */
  readonly totalCount: number;
}

/**
 * One page of the listing (keyset pagination, newest first: the `first` works strictly after the cursor in
 * (created_at, id) descending order; a work added meanwhile is newer than any cursor, so it never shifts a later
 * page) with the count of the works under the filter, in one statement: one round trip, and one snapshot for the
 * page, its count and whether works come before it, which PostgreSQL gives every part of a statement.
 *
 * The count is the sum of the counters the triggers on works keep, written in the same transactions as the rows
 * (work_counts per organization and network, work_ref_counts per organization, ref and network; each in up to 16
 * slots), so a large organization's or a large ref's count reads a few rows, not a scan. The page joins one row of
 * those figures, so an empty page still answers them.
 */
export async function pageOfWorks(db: Knex, filter: ListFilter, first: number, after?: Cursor): Promise<WorksPageRows> {
  const { rows } = (await pageStatement(db, filter, first, after)) as { rows: Record<string, any>[] };
  const figures = rows[0]!;
  const found = rows.filter((r) => r.id !== null);
  return {
    works: found.slice(0, first).map((r) => ({ ...toWork(r), cursor: { createdAt: r.cursor_at, id: r.id } })),
    hasNextPage: found.length > first,
    hasPreviousPage: figures.has_previous === true,
    totalCount: Number(figures.total_count),
  };
}

/** pageOfWorks' statement: the figures' one row, joined to the page's rows (none for an empty page). */
export function pageStatement(db: Knex, filter: ListFilter, first: number, after?: Cursor): Knex.Raw {
  const slice = scoped(db, filter).select('*', db.raw(`${CURSOR_AT} AS cursor_at`));
  if (after) slice.andWhereRaw('(created_at, id) < (?::timestamptz, ?::uuid)', [after.createdAt, after.id]);
  slice
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(first + 1);
  const count =
    filter.externalUserRef === undefined
      ? db('work_counts').where({ organization_id: filter.organizationId }).sum('works')
      : db('work_ref_counts').where({ organization_id: filter.organizationId, external_user_ref: filter.externalUserRef }).sum('works');
  if (filter.network) count.andWhere({ network: filter.network });
  const before = after
    ? scoped(db, filter).whereRaw('(created_at, id) >= (?::timestamptz, ?::uuid)', [after.createdAt, after.id]).select(db.raw('1')).limit(1)
    : undefined;
  return db.raw(
    `SELECT figures.total_count, figures.has_previous, page.*
       FROM (SELECT COALESCE((?), 0)::bigint AS total_count, ${before ? 'EXISTS (?)' : 'false'} AS has_previous) AS figures
       LEFT JOIN LATERAL (?) AS page ON true
      ORDER BY page.created_at DESC, page.id DESC`,
    before ? [count, before, slice] : [count, slice],
  );
}

/** The organization's works with this ats_id: one per network at most. */
export async function worksByAtsId(db: Knex, organizationId: string, atsId: number, networks: readonly Network[]): Promise<WorkRecord[]> {
  // network IN (…) lets the unique (network, ats_id) index answer
  const rows = await db('works')
    .whereIn('network', networks)
    .andWhere({ ats_id: atsId, organization_id: organizationId })
    .orderBy('network');
  return rows.map(toWork);
}

export async function findWork(db: Knex, scope: WorkScope, id: string): Promise<WorkRecord | undefined> {
  const query = db('works').where({ id, organization_id: scope.organizationId });
  if (scope.externalUserRef !== undefined) query.andWhere({ external_user_ref: scope.externalUserRef });
  const row = await query.first();
  return row ? toWork(row) : undefined;
}

/** Any organization's work: for workers, which act on ids they were given. */
export async function workById(db: Knex, id: string): Promise<WorkRecord | undefined> {
  const row = await db('works').where({ id }).first();
  return row ? toWork(row) : undefined;
}

export async function listVersions(db: Knex, workId: string): Promise<WorkVersionRecord[]> {
  const rows = await db('work_versions').where({ work_id: workId }).orderBy('version', 'asc');
  return rows.map(toVersion);
}

export async function findVersion(db: Knex, workId: string, version: number): Promise<WorkVersionRecord | undefined> {
  const row = await db('work_versions').where({ work_id: workId, version }).first();
  return row ? toVersion(row) : undefined;
}

/** A version with what the certificate needs of its work, in one read; undefined when there is no such version. */
export async function versionWithWork(
  db: Knex,
  workId: string,
  version: number,
): Promise<{ work: Pick<WorkRecord, 'id' | 'organizationId' | 'network' | 'atsId' | 'owner'>; version: WorkVersionRecord } | undefined> {
  const row = await db('work_versions as v')
    .join('works as w', 'w.id', 'v.work_id')
    .where({ 'v.work_id': workId, 'v.version': version })
    .first('v.*', 'w.organization_id', 'w.network', 'w.ats_id', 'w.owner');
  if (!row) return undefined;
  const work = { id: row.work_id, organizationId: row.organization_id, network: row.network, atsId: Number(row.ats_id), owner: row.owner };
  return { work, version: toVersion(row) };
}

export async function countVersions(db: Knex, workId: string): Promise<number> {
  const [row] = await db('work_versions').where({ work_id: workId }).count<{ count: string }[]>('* as count');
  return Number(row?.count ?? 0);
}

/** The work with this registration id on a network, whatever its organization (the operator's `verify`). */
export async function workOnNetwork(db: Knex, network: Network, atsId: number): Promise<WorkRecord | undefined> {
  const row = await db('works').where({ network, ats_id: atsId }).first();
  return row ? toWork(row) : undefined;
}

/** The organization's work with this registration id on a network. */
export async function workOnNetworkOf(db: Knex, organizationId: string, network: Network, atsId: number): Promise<WorkRecord | undefined> {
  const row = await db('works').where({ organization_id: organizationId, network, ats_id: atsId }).first();
  return row ? toWork(row) : undefined;
}

/** The latest version of a work: what a metadata-only version reuses. */
export async function latestVersion(db: Knex, workId: string): Promise<WorkVersionRecord | undefined> {
  const row = await db('work_versions').where({ work_id: workId }).orderBy('version', 'desc').first();
  return row ? toVersion(row) : undefined;
}

/** A registration's finalized work row (its first version is inserted alongside). */
export type NewWork = Omit<WorkRecord, 'latestVersion'> & { readonly accessCodeHash: Buffer | null };

/** A registration's work and its first version, as the finalized index receives them. */
export interface NewWorkWithVersion {
  readonly work: NewWork;
  readonly first: WorkVersionRecord;
}

/**
 * Registrations' works and their first versions, in one statement however many (the versions' rows refer to
 * the works'); their organizations' counters (work_counts) are locked by its trigger, in organization and network order.
 */
export async function insertWorks(trx: Knex.Transaction, registrations: readonly NewWorkWithVersion[]): Promise<void> {
  if (registrations.length === 0) return;
  const rows = registrations.map(({ work }) => ({
    id: work.id,
    organization_id: work.organizationId,
    network: work.network,
    ats_id: work.atsId,
    owner: work.owner,
    title: work.title,
    asset_filename: work.assetFilename,
    latest_version: 1,
    latest_commitment: work.latestCommitment,
    external_user_ref: work.externalUserRef,
    access_code_hash: work.accessCodeHash,
    has_files: work.hasFiles,
    created_at: work.createdAt,
    latest_version_at: work.latestVersionAt,
  }));
  const versions = registrations.map(({ first }) => versionRow(first));
  // the columns are the rows' own, the same at every call: one statement text, prepared once per connection
  insertWorksText ??= `WITH work AS (${insertManyText('works', Object.keys(rows[0]!))}) ${insertManyText('work_versions', Object.keys(versions[0]!), 2)}`;
  await prepared(trx, 'works_insert_with_versions', insertWorksText, [rowsParameter(rows), rowsParameter(versions)]);
}

/** Registrations' works and first versions in one statement (`insertWorks`), written at its first call. */
let insertWorksText: string | undefined;

/** The work's latest version number, its row locked until the caller's transaction ends (orders version writers). */
export async function lockLatestVersion(trx: Knex.Transaction, workId: string): Promise<number> {
  const row = await trx('works').where({ id: workId }).forUpdate().first('latest_version');
  return Number(row.latest_version);
}

export async function advanceWork(
  trx: Knex.Transaction,
  workId: string,
  to: { version: number; commitment: string; at: Date; assetFilename?: string },
): Promise<void> {
  await trx('works')
    .where({ id: workId })
    .update({
      latest_version: to.version,
      latest_commitment: to.commitment,
      latest_version_at: to.at,
      ...(to.assetFilename === undefined ? {} : { asset_filename: to.assetFilename }),
    });
}

export async function insertVersion(trx: Knex.Transaction, v: WorkVersionRecord): Promise<void> {
  await insertRows(trx, 'work_versions', [versionRow(v)], 'version');
}

const versionRow = (v: WorkVersionRecord) => ({
  work_id: v.workId,
  version: v.version,
  transaction_id: v.transactionId,
  commitment: v.commitment,
  media_hash: v.mediaHash,
  merkle_root: v.merkleRoot,
  title: v.title,
  filename: v.filename,
  // a JSON column's value, as rowsParameter takes it; an anchor backfilled without creators (20261123000000) holds null,
  // which a typed parameter wrote as JSON's null and would now be SQL's NULL, refused by the column
  creators: (v.creators as readonly Creator[] | null) ?? [],
  audio_key: v.audioKey,
  audio_size: v.audioSize,
  tx_hash: v.txHash,
  block_number: v.blockNumber,
  block_hash: v.blockHash,
  extrinsic_index: v.extrinsicIndex,
  finalized_at: v.finalizedAt,
});
