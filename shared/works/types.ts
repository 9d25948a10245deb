import type { Network } from '../config';

/** A creator as the partner sent it (docs/api.md#field-rules) and the commitment encodes it (docs/api.md#byte-encoding). */
export interface CreatorRoles {
  readonly author?: boolean;
  readonly composer?: boolean;
  readonly arranger?: boolean;
  readonly adapter?: boolean;
}

export interface Creator {
  readonly full_name: string;
  readonly roles: CreatorRoles;
  readonly ipi?: string;
  readonly isni?: string;
  readonly email?: string;
}

/** A row of the finalized index (`works`): written only when a registration's block is final. */
export interface WorkRecord {
  readonly id: string;
  readonly organizationId: string;
  readonly network: Network;
  readonly atsId: number;
  readonly owner: string;
  readonly title: string;
  readonly assetFilename: string;
  readonly latestVersion: number;
  readonly latestCommitment: string;
  readonly externalUserRef: string | null;
  readonly hasFiles: boolean;
  readonly createdAt: Date;
  readonly latestVersionAt: Date;
}

/** One finalized version (`work_versions`): what was anchored, and where on chain. */
export interface WorkVersionRecord {
  readonly workId: string;
  readonly version: number;
  readonly transactionId: string;
  readonly commitment: string;
  readonly mediaHash: string;
  readonly merkleRoot: string;
  readonly title: string;
  readonly filename: string;
  readonly creators: readonly Creator[];
  /**
   * The audio this version anchored. A metadata-only version points at the object of the version whose
   * audio it reuses, so every version has its audio here.
   */
  readonly audioKey: string;
  readonly audioSize: number;
  readonly txHash: string;
  readonly blockNumber: number;
  readonly blockHash: string;
  readonly extrinsicIndex: number;
  readonly finalizedAt: Date;
}

/** Who may see which works: an organization, narrowed to one end-user's ref when set. */
export interface WorkScope {
  readonly organizationId: string;
  readonly externalUserRef?: string;
}
