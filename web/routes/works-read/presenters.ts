import type { Creator } from '../../../shared/works/types';
import type { Download } from '../../../shared/works/downloads';
import type { WorksPage } from '../../../shared/works/service';
import type { WorkRecord, WorkVersionRecord } from '../../../shared/works/types';

/** A work as the listing lists it (docs/api.md#listing-and-cursors). */
export function presentWork(work: WorkRecord) {
  return {
    id: work.id,
    ats_id: work.atsId,
    owner: work.owner,
    latest_version: work.latestVersion,
    latest_commitment: work.latestCommitment,
    created_at: work.createdAt.toISOString(),
    latest_version_at: work.latestVersionAt.toISOString(),
    title: work.title,
    asset_filename: work.assetFilename,
    has_files: work.hasFiles,
  };
}

/** The listing page (docs/api.md#listing-and-cursors). */
export function presentWorksPage(page: WorksPage) {
  return {
    works: page.works.map(presentWork),
    page_info: {
      has_next_page: page.pageInfo.hasNextPage,
      has_previous_page: page.pageInfo.hasPreviousPage,
      start_cursor: page.pageInfo.startCursor,
      end_cursor: page.pageInfo.endCursor,
    },
    total_count: page.totalCount,
  };
}

/** docs/api.md#work-detail: the listing's work plus network, external_user_ref and versions_count. */
export function presentWorkDetail({ work, versionsCount }: { work: WorkRecord; versionsCount: number }) {
  return { ...presentWork(work), network: work.network, external_user_ref: work.externalUserRef, versions_count: versionsCount };
}

export function presentVersions(versions: readonly WorkVersionRecord[]) {
  return {
    versions: versions.map((v) => ({
      version: v.version,
      commitment: v.commitment,
      title: v.title,
      filename: v.filename,
      tx_hash: v.txHash,
      block_number: v.blockNumber,
      block_hash: v.blockHash,
      finalized_at: v.finalizedAt.toISOString(),
    })),
  };
}

/** A creator as anchored, every role named and absent identifiers null, so every element has one shape. */
function presentCreator(creator: Creator) {
  const roles = creator.roles;
  return {
    full_name: creator.full_name,
    roles: {
      author: roles.author === true,
      composer: roles.composer === true,
      arranger: roles.arranger === true,
      adapter: roles.adapter === true,
    },
    ipi: creator.ipi ?? null,
    isni: creator.isni ?? null,
    email: creator.email ?? null,
  };
}

export function presentCreators({ version, creators }: { version: number; creators: readonly Creator[] }) {
  return { version, creators: creators.map(presentCreator) };
}

export function presentDownload(download: Download) {
  return { url: download.url, expires_at: download.expiresAt.toISOString() };
}
