import type { Knex } from 'knex';
import type { Network } from '../config';
import type { WorkVersionRecord } from './types';
import { advanceWork, insertVersion, insertWork, lockLatestVersion } from './repo';

/** A version final on chain, as the finalized index records it: the version's row and its work's. */
export interface FinalizedVersion extends WorkVersionRecord {
  readonly organizationId: string;
  readonly network: Network;
  readonly atsId: number;
  readonly owner: string;
  readonly externalUserRef: string | null;
  readonly accessCodeHash: Buffer | null;
  /** A metadata-only version keeps the work's file name. */
  readonly reusedAudio: boolean;
}

/**
 * Writes a final version into the index, inside the caller's transaction: a registration creates the work with it,
 * a version moves the work's latest version on. Versions of a work are numbered one after another; the
 * work's row lock orders concurrent writers, and a version out of turn is refused.
 */
export async function indexFinalizedVersion(trx: Knex.Transaction, v: FinalizedVersion): Promise<void> {
  if (v.version === 1) {
    await insertWork(
      trx,
      {
        id: v.workId,
        organizationId: v.organizationId,
        network: v.network,
        atsId: v.atsId,
        owner: v.owner,
        title: v.title,
        assetFilename: v.filename,
        latestCommitment: v.commitment,
        externalUserRef: v.externalUserRef,
        accessCodeHash: v.accessCodeHash,
        hasFiles: true,
        createdAt: v.finalizedAt,
        latestVersionAt: v.finalizedAt,
      },
      v,
    );
    return;
  }
  const latest = await lockLatestVersion(trx, v.workId);
  if (latest + 1 !== v.version) throw new Error(`work ${v.workId} is at version ${latest}; cannot add version ${v.version}`);
  await advanceWork(trx, v.workId, {
    version: v.version,
    commitment: v.commitment,
    at: v.finalizedAt,
    ...(v.reusedAudio ? {} : { assetFilename: v.filename }),
  });
  await insertVersion(trx, v);
}
