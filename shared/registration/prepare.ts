import { createHash } from 'node:crypto';
import { DeleteObjectCommand } from '@aws-sdk/client-s3';
import { getObject, headObject, type ObjectHead } from '../storage/objects';
import type { Knex } from 'knex';
import type { Config } from '../config';
import type { Redis } from '../redis/client';
import type { Storage } from '../storage/s3';
import type { SecretBox } from '../crypto/secret-box';
import { AppError } from '../errors';
import type { AnchorQuote, AnchorService } from '../chain/anchors';
import { withWalletSeed } from '../organizations/service';
import { balanceOf } from '../ledger/service';
import { PROTOCOL_VERSION, computeCommitment, toHex } from './commitment';
import { priceQuote } from './pricing';
import { JobStore, type JobRecord } from './job-store';
import type { PreparedQuote, UploadSession } from './types';
import { sessionNotFound, type PrepareOutcome } from './service';

export interface PrepareDeps {
  readonly db: Knex;
  readonly redis: Redis;
  readonly storage: Storage;
  readonly box: SecretBox;
  readonly config: Pick<Config, 'redis' | 'ttl' | 'uploads' | 'pricing'>;
}

/**
 * The prepare worker's work for one run of a job (see job-store.ts): verify and stream the uploaded object
 * through SHA-256 (constant memory; once per upload, a later run reuses the hash while the object is the
 * same), compute the commitment (docs/api.md#the-commitment), ask the chain for the fee and a dry run of the call (while
 * the bytes stream: neither depends on the commitment's bytes), price, and store the quote in the job. Domain
 * failures come back as data, so the waiting web answers with them and nothing is retried. An upload refused
 * for its size is deleted at once.
 */
export async function prepareQuote(
  deps: PrepareDeps,
  anchors: AnchorService,
  organizationId: string,
  jobId: string,
  run: number,
): Promise<PrepareOutcome> {
  const store = new JobStore(deps.redis, deps.config.redis.prefix);
  try {
    const job = await store.load(organizationId, jobId);
    if (!job || job.run !== run || job.state === 'confirming' || job.state === 'confirmed') throw sessionNotFound(); // confirmed, expired, or taken over by a later run
    const quote = await buildQuote(deps, anchors, store, job, run);
    if (!(await store.finishPrepare(organizationId, jobId, run, quote))) throw sessionNotFound(); // confirmed, expired, or taken over by a later run
    return { ok: true, quote };
  } catch (err) {
    await store.releasePrepare(organizationId, jobId, run);
    if (err instanceof AppError) return { ok: false, code: err.code, message: err.message };
    throw err;
  }
}

async function buildQuote(app: PrepareDeps, anchors: AnchorService, store: JobStore, job: JobRecord, run: number): Promise<PreparedQuote> {
  const { session } = job;
  // a metadata-only version anchors the audio its work already anchored: nothing to read
  const upload = session.reusedAudio ? undefined : await acceptedUpload(app, session);
  // the chain's verdict does not depend on the commitment's bytes (AnchorService.quoteAhead): once the upload
  // is accepted, it is asked while the bytes stream, and awaited after them
  const chainWork = chainQuote(app, anchors, session);
  chainWork.catch(() => undefined); // awaited below, unless reading the upload fails first
  const audio = upload
    ? await uploadedAudio(app, store, job, run, upload)
    : { mediaHash: Buffer.from(session.reusedAudio!.mediaHash.slice(2), 'hex'), size: session.reusedAudio!.size };
  const { commitment, merkleRoot, mediaHash } = computeCommitment(audio.mediaHash, session.title, session.creators);
  const chain = await chainWork;
  if (!chain.dryRun.ok) throw new AppError('registration.dry_run_failed', `The on-chain dry run failed: ${chain.dryRun.reason}`);

  // storage is charged for new bytes only
  const storedBytes = session.reusedAudio ? 0 : audio.size;
  const price = priceQuote(app.config.pricing, {
    feePlanck: chain.feePlanck,
    decimals: chain.decimals,
    audioBytes: storedBytes,
    kind: session.kind,
  });
  const balance = await balanceOf(app.db, session.organizationId);
  const affordable = balance >= price.total_price_credits;
  const lifetime = Math.min(app.config.ttl.quoteSeconds, chain.mortalitySeconds);
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
      : {
          error: {
            code: 'credits.insufficient',
            message: `The organization has ${balance} credits; this costs ${price.total_price_credits}`,
          },
        }),
    expiresAt: new Date(Date.now() + lifetime * 1000).toISOString(),
  };
}

/** The chain's fee and dry run of this job's anchor call, signed by the organization's wallet where the chain checks it. */
function chainQuote(app: PrepareDeps, anchors: AnchorService, session: UploadSession): Promise<AnchorQuote> {
  return anchors.quoteAhead(
    session.network,
    {
      action: session.kind === 'register' ? 'register' : 'update',
      network: session.network,
      protocolVersion: PROTOCOL_VERSION,
      atsId: BigInt(session.atsId ?? 0), // the payload has a fixed size: the fee does not depend on the id
      version: 1,
    },
    (use) => withWalletSeed(app, session.organizationId, session.network, use),
  );
}

/** The upload as its HEAD found it. */
type AcceptedUpload = ObjectHead;

/** The upload's size and ETag, if there is one and its size is accepted. An object refused for its size is deleted, so nothing refused is kept. */
async function acceptedUpload(app: PrepareDeps, session: UploadSession): Promise<AcceptedUpload> {
  const head = await headObject(app.storage, session.audioKey);
  if (!head) throw new AppError('registration.audio_missing', 'No audio has been uploaded to upload_url yet');
  const { size, etag } = head;
  const refusal =
    size === 0
      ? new AppError('registration.audio_empty', 'The uploaded audio is empty')
      : size > app.config.uploads.maxBytes
        ? new AppError('registration.audio_too_large', `The uploaded audio is larger than ${app.config.uploads.maxBytes} bytes`)
        : undefined;
  if (refusal) {
    await app.storage.client.send(new DeleteObjectCommand({ Bucket: app.storage.bucket, Key: session.audioKey }));
    throw refusal;
  }
  return { size, etag };
}

/** The accepted upload's hash: read again only when the object is not the one a previous run hashed. */
async function uploadedAudio(
  app: PrepareDeps,
  store: JobStore,
  job: JobRecord,
  run: number,
  { size, etag }: AcceptedUpload,
): Promise<{ mediaHash: Buffer; size: number }> {
  const { session } = job;
  if (job.audio && job.audio.etag === etag && job.audio.size === size)
    return { mediaHash: Buffer.from(job.audio.mediaHash.slice(2), 'hex'), size };

  // the GET is pinned to the ETag the HEAD saw
  const object = await getObject(app.storage, session.audioKey, etag);
  const hash = createHash('sha256');
  let read = 0;
  for await (const chunk of object) {
    read += (chunk as Buffer).length;
    hash.update(chunk as Buffer);
  }
  if (read !== size) throw new Error(`read ${read} bytes of an object of ${size}`);
  const mediaHash = hash.digest();
  await store.recordAudio(session.organizationId, session.jobId, run, { mediaHash: toHex(mediaHash), size, etag });
  return { mediaHash, size };
}
