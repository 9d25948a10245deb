import type { Knex } from 'knex';
import type { Network } from '../config';
import type { WorkVersionRecord } from './types';
import { advanceWork, insertVersion, insertWorks, lockLatestVersion } from './repo';

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
 * Writes final versions into the index, inside the caller's transaction: registrations create their works with
 * their first versions (together, in one statement), then each version, in the order given, moves its work's
 * latest version on. Versions of a work are numbered one after another; the work's row lock orders concurrent
 * writers, and a version out of turn is refused.
 */
export async function indexFinalizedVersions(trx: Knex.Transaction, finalized: readonly FinalizedVersion[]): Promise<void> {
  await insertWorks(
    trx,
    finalized
      .filter((v) => v.version === 1)
      .map((v) => ({
        work: {
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
        first: v,
      })),
  );
  for (const v of finalized) {
    if (v.version === 1) continue;
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
}
