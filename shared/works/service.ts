import type { Knex } from 'knex';
import { NETWORKS, type Network } from '../config';
import { AppError, notFound } from '../errors';
import type { Principal } from '../api-keys/types';
import type { Creator } from '../works/types';
import { decodeCursor, encodeCursor } from './cursor';
import { countVersions, findVersion, findWork, listVersions, pageOfWorks, worksByAtsId, type ListFilter } from './repo';
import type { WorkRecord, WorkScope, WorkVersionRecord } from './types';

/**
 * The read side of the finalized index (docs/api.md#reading-works). Rows are written only by finalization,
 * from the block that was found final and canonical, so what is served here is chain data read back.
 */

/** What a principal may see: its organization's works; a session token only its own ref's. */
export function scopeOf(principal: Principal): WorkScope {
  return principal.kind === 'session'
    ? { organizationId: principal.organizationId, externalUserRef: principal.externalUserRef }
    : { organizationId: principal.organizationId };
}

export interface ListWorksInput {
  readonly network?: Network;
  readonly first: number;
  readonly after?: string;
  readonly external_user_ref?: string;
}

export interface WorksPage {
  readonly works: WorkRecord[];
  readonly pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
  readonly totalCount: number;
}

/**
 * One page of the listing, newest first. A session token's ref replaces any ref in the query. The page and
 * total_count come from one statement, so one snapshot: they agree however many works arrive meanwhile.
 */
export async function listWorks(db: Knex, principal: Principal, input: ListWorksInput): Promise<WorksPage> {
  const scope = scopeOf(principal);
  const externalUserRef = scope.externalUserRef ?? input.external_user_ref;
  const filter: ListFilter = { organizationId: scope.organizationId, network: input.network, externalUserRef };
  const after = input.after !== undefined ? decodeCursor(input.after) : undefined;
  const page = await pageOfWorks(db, filter, input.first, after);
  if (externalUserRef !== undefined && page.totalCount === 0) throw notFound('Works of this external_user_ref');
  const first = page.works[0];
  const last = page.works[page.works.length - 1];
  return {
    works: page.works,
    pageInfo: {
      hasNextPage: page.hasNextPage,
      hasPreviousPage: page.hasPreviousPage,
      startCursor: first ? encodeCursor(first.cursor) : null,
      endCursor: last ? encodeCursor(last.cursor) : null,
    },
    totalCount: page.totalCount,
  };
}

/**
 * The organization's work with this ats_id: for a key, whatever its ref (a query ref never narrows the
 * detail routes); for an end-user session, only a work of its own ref (another's: 404, docs/api.md#sessions).
 * Without a network, the one network that has it; on both, the caller must choose (409 common.conflict).
 */
export async function workByAtsId(db: Knex, principal: Principal, atsId: number, network?: Network): Promise<WorkRecord> {
  const scope = scopeOf(principal);
  const works = (await worksByAtsId(db, principal.organizationId, atsId, network ? [network] : NETWORKS)).filter(
    (w) => scope.externalUserRef === undefined || w.externalUserRef === scope.externalUserRef,
  );
  if (works.length === 0) throw notFound('Work');
  if (works.length > 1)
    throw new AppError(
      'common.conflict',
      `ats_id ${atsId} exists on ${works.map((w) => w.network).join(' and ')}: choose one with ?network=`,
    );
  return works[0]!;
}

export async function workDetail(
  db: Knex,
  principal: Principal,
  atsId: number,
  network?: Network,
): Promise<{ work: WorkRecord; versionsCount: number }> {
  const work = await workByAtsId(db, principal, atsId, network);
  return { work, versionsCount: await countVersions(db, work.id) };
}

export async function workVersions(db: Knex, principal: Principal, atsId: number, network?: Network): Promise<WorkVersionRecord[]> {
  const work = await workByAtsId(db, principal, atsId, network);
  return listVersions(db, work.id);
}

/** The creators a version anchored: the latest unless `version` names another. */
export async function workCreators(
  db: Knex,
  principal: Principal,
  atsId: number,
  network?: Network,
  version?: number,
): Promise<{ version: number; creators: readonly Creator[] }> {
  const work = await workByAtsId(db, principal, atsId, network);
  const found = await findVersion(db, work.id, version ?? work.latestVersion);
  if (!found) throw notFound('Version');
  return { version: found.version, creators: found.creators };
}

/** A work by its UUID and one of its versions (the latest when none is named), within the principal's scope. */
export async function workVersion(
  db: Knex,
  principal: Principal,
  workId: string,
  version?: number,
): Promise<{ work: WorkRecord; version: WorkVersionRecord }> {
  const work = UUID.test(workId) ? await findWork(db, scopeOf(principal), workId) : undefined;
  if (!work) throw notFound('Work');
  const found = await findVersion(db, work.id, version ?? work.latestVersion);
  if (!found) throw notFound('Version');
  return { work, version: found };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
