import { objectExists, putObject } from '../storage/objects';
import type { Knex } from 'knex';
import type { Config } from '../config';
import type { Storage } from '../storage/s3';
import type { WorkRecord, WorkVersionRecord } from '../works/types';
import { versionWithWork } from '../works/repo';
import { announcedExplorerUrl } from '../transactions/repo';
import { renderCertificate } from './render';
import { explorerUrl as formatExplorerUrl } from '../chain/explorer';

/**
 * A certificate per finalized version: a PDF in S3 at a key derived from the version, rendered by the
 * `certificates` worker once the version is final, or by whoever asks for it first if it is missing.
 * Rendering is deterministic enough to be repeated: two renderings of one version state the same facts.
 */
export const certificateKey = (work: Pick<WorkRecord, 'organizationId' | 'id'>, version: number) =>
  `certificates/${work.organizationId}/${work.id}/v${version}.pdf`;

export interface CertificateDeps {
  readonly db: Knex;
  readonly storage: Storage;
  readonly config: Pick<Config, 'chains'>;
}

type Deps = CertificateDeps;

/**
 * The certificate's object key, rendering and storing it first when S3 does not have it; or, `unasked`, without
 * asking S3 first: the first run of the job a version's finality enqueued almost never finds one (only a download
 * in between renders it), and a rendering stored again states the same facts.
 */
export async function ensureCertificate(app: Deps, work: CertifiedWork, version: WorkVersionRecord, unasked = false): Promise<string> {
  const key = certificateKey(work, version.version);
  if (!unasked && (await objectExists(app.storage, key))) return key;
  const pdf = await renderCertificate({
    workId: work.id,
    atsId: work.atsId,
    version: version.version,
    network: work.network,
    title: version.title,
    filename: version.filename,
    creators: version.creators,
    commitment: version.commitment,
    mediaHash: version.mediaHash,
    merkleRoot: version.merkleRoot,
    owner: work.owner,
    blockNumber: version.blockNumber,
    blockHash: version.blockHash,
    txHash: version.txHash,
    finalizedAt: version.finalizedAt,
    explorerUrl: await explorerUrl(app, work, version),
  });
  await putObject(app.storage, key, pdf, 'application/pdf');
  return key;
}

/**
 * The worker's entry: the version and its work by ids, in one read (`unasked`: see `ensureCertificate`);
 * undefined when no such finalized version exists. Everything a certificate states comes from PostgreSQL,
 * never from the job's data (which Bull Board can edit).
 */
export async function renderCertificateOf(app: Deps, workId: string, version: number, unasked = false): Promise<string | undefined> {
  const found = await versionWithWork(app.db, workId, version);
  return found ? ensureCertificate(app, found.work, found.version, unasked) : undefined;
}

/** What a certificate states of its work, and where it is stored. */
type CertifiedWork = Pick<WorkRecord, 'id' | 'organizationId' | 'network' | 'atsId' | 'owner'>;

/** The link finalization announced (webhook, transaction result); else one built from today's template. */
async function explorerUrl(app: Deps, work: CertifiedWork, version: WorkVersionRecord): Promise<string> {
  const announced = await announcedExplorerUrl(app.db, version.transactionId);
  if (announced) return announced;
  return formatExplorerUrl(app.config.chains, work.network, { blockNumber: version.blockNumber, index: version.extrinsicIndex });
}
