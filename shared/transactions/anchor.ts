import type { Creator } from '../works/types';

/**
 * What a confirmed transaction anchors, mapped once from the quote at confirm: the commitment the chain call
 * carries and the metadata finalization indexes. Stored as the transaction's `anchor`.
 */
export interface AnchorPayload {
  readonly jobId: string;
  readonly commitment: string;
  readonly mediaHash: string;
  readonly merkleRoot: string;
  readonly audioKey: string;
  readonly audioSize: number;
  readonly title: string;
  readonly filename: string;
  readonly creators: readonly Creator[];
  /** A metadata-only version: the audio (and its filename) of the work's latest version, reused. */
  readonly reusedAudio: boolean;
}
