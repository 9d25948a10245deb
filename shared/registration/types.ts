import type { Network } from '../config';
import type { Creator } from '../works/types';

export type JobKind = 'register' | 'add_version';

/** What init reserves in Redis for `upload_ttl` seconds. */
export interface UploadSession {
  readonly jobId: string;
  readonly kind: JobKind;
  readonly organizationId: string;
  readonly apiKeyId: string;
  readonly network: Network;
  readonly title: string;
  readonly filename: string;
  readonly creators: Creator[];
  readonly externalUserRef: string | null;
  /** The S3 key the presigned PUT writes. */
  readonly audioKey: string;
  readonly createdAt: string;
  readonly uploadExpiresAt: string;
  /** Versions only: the target work. */
  readonly workId?: string;
  readonly atsId?: number;
  /**
   * Metadata-only versions: the audio already anchored by the work's latest version, reused as is
   * (`audioKey` is then that version's object; nothing is uploaded).
   */
  readonly reusedAudio?: { readonly mediaHash: string; readonly size: number };
}

export interface PriceLines {
  readonly network_fee_credits: number;
  readonly deposit_credits: number;
  readonly service_fee_credits: number;
  readonly storage_fee_credits: number;
  readonly total_price_credits: number;
}

/** A prepared quote, held in Redis until it expires or confirm consumes it. */
export interface PreparedQuote {
  readonly session: UploadSession;
  readonly commitment: string;
  readonly mediaHash: string;
  readonly merkleRoot: string;
  readonly audioSize: number;
  readonly price: PriceLines;
  readonly isValid: boolean;
  readonly error?: { code: string; message: string };
  readonly expiresAt: string;
}
