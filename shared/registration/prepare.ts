import { createHash } from 'node:crypto';
import { GetObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import type { Readable } from 'node:stream';
import type { AppContext } from '../context';
import { AppError } from '../errors';
import { AnchorService } from '../chain/anchors';
import { findWallet } from '../organizations/repo';
import { walletSeedAad } from '../organizations/service';
import { balanceOf } from '../ledger/service';
import { PROTOCOL_VERSION, computeCommitment, toHex } from './commitment';
import { priceQuote } from './pricing';
import { RegistrationStore } from './store';
import type { PreparedQuote, UploadSession } from './types';
import type { PrepareOutcome } from './service';

export interface PrepareDeps {
  readonly app: AppContext;
  readonly anchors: AnchorService;
}

/**
 * The prepare worker's work: verify and stream the uploaded object through SHA-256 (constant memory),
 * compute the commitment (contract §5), ask the chain for the fee and a dry run of the exact call, price.
 * Domain failures come back as data, so the waiting web answers with them and nothing is retried.
 */
export async function prepareQuote(deps: PrepareDeps, organizationId: string, jobId: string): Promise<PrepareOutcome> {
  try {
    return { ok: true, quote: await buildQuote(deps, organizationId, jobId) };
  } catch (err) {
    if (err instanceof AppError) return { ok: false, code: err.code, message: err.message };
    throw err;
  }
}

async function buildQuote({ app, anchors }: PrepareDeps, organizationId: string, jobId: string): Promise<PreparedQuote> {
  const session = await new RegistrationStore(app.redis, app.config.redis.prefix).session(organizationId, jobId);
  if (!session) throw new AppError('registration.upload_session_not_found', 'No upload session with this job_id (unknown or expired)');

  // a metadata-only version anchors the audio its work already anchored: nothing to read
  const audio = session.reusedAudio
    ? { mediaHash: Buffer.from(session.reusedAudio.mediaHash.slice(2), 'hex'), size: session.reusedAudio.size }
    : await hashAudio(app, session);
  const { commitment, merkleRoot, mediaHash } = computeCommitment(audio.mediaHash, session.title, session.creators);

  const wallet = await findWallet(app.db, organizationId, session.network);
  if (!wallet) throw new Error(`organization ${organizationId} has no ${session.network} wallet`);
  const seed = app.box.open(wallet.seedEncrypted, walletSeedAad(organizationId, session.network));
  let chainQuote;
  try {
    chainQuote = await anchors.quote(session.network, {
      action: session.kind === 'register' ? 'register' : 'update',
      network: session.network,
      protocolVersion: PROTOCOL_VERSION,
      atsId: BigInt(session.atsId ?? 0), // the payload has a fixed size: the fee does not depend on the id
      version: 1,
      commitment,
      ownerSeed: seed,
    });
  } finally {
    seed.fill(0);
  }
  if (!chainQuote.dryRun.ok) throw new AppError('registration.dry_run_failed', `The on-chain dry run failed: ${chainQuote.dryRun.reason}`);

  // storage is charged for new bytes only
  const storedBytes = session.reusedAudio ? 0 : audio.size;
  const price = priceQuote(app.config.pricing, { feePlanck: chainQuote.feePlanck, decimals: chainQuote.decimals, audioBytes: storedBytes, kind: session.kind });
  const balance = await balanceOf(app.db, organizationId);
  const affordable = balance >= price.total_price_credits;
  const lifetime = Math.min(app.config.ttl.quoteSeconds, chainQuote.mortalitySeconds);
  return {
    session,
    commitment: toHex(commitment),
    mediaHash: toHex(mediaHash),
    merkleRoot: toHex(merkleRoot),
    audioSize: audio.size,
    price,
    isValid: affordable,
    ...(affordable
      ? {}
      : { error: { code: 'credits.insufficient', message: `The organization has ${balance} credits; this costs ${price.total_price_credits}` } }),
    expiresAt: new Date(Date.now() + lifetime * 1000).toISOString(),
  };
}

/** Streams the object through SHA-256; the GET is pinned to the ETag the HEAD saw. */
async function hashAudio(app: AppContext, session: UploadSession): Promise<{ mediaHash: Buffer; size: number }> {
  let head;
  try {
    head = await app.storage.client.send(new HeadObjectCommand({ Bucket: app.storage.bucket, Key: session.audioKey }));
  } catch (err) {
    if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) {
      throw new AppError('registration.audio_missing', 'No audio has been uploaded to upload_url yet');
    }
    throw err;
  }
  const size = head.ContentLength ?? 0;
  if (size === 0) throw new AppError('registration.audio_empty', 'The uploaded audio is empty');
  if (size > app.config.uploads.maxBytes) throw new AppError('registration.audio_too_large', `The uploaded audio is larger than ${app.config.uploads.maxBytes} bytes`);

  const object = await app.storage.client.send(new GetObjectCommand({ Bucket: app.storage.bucket, Key: session.audioKey, IfMatch: head.ETag }));
  const hash = createHash('sha256');
  let read = 0;
  for await (const chunk of object.Body as Readable) {
    read += (chunk as Buffer).length;
    hash.update(chunk as Buffer);
  }
  if (read !== size) throw new Error(`read ${read} bytes of an object of ${size}`);
  return { mediaHash: hash.digest(), size };
}
