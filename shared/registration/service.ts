import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { QueueEvents } from 'bullmq';
import type { Config, Network } from '../config';
import type { Logger } from '../logger';
import type { Redis } from '../redis/client';
import type { Storage } from '../storage/s3';
import { AppError, notFound, type ErrorCode } from '../errors';
import type { Principal } from '../api-keys/types';
import { ADMITTED, type Admission } from '../api-keys/key-cache';
import type { Creator } from '../works/types';
import { latestVersion, workOnNetworkOf } from '../works/repo';
import { enqueuePrepare, type Queues } from '../queue/jobs';
import { JobStore } from './job-store';
import type { PreparedQuote, UploadSession } from './types';
import { assertValid, creatorProblems, filenameProblems, networkProblems, refProblems, titleProblems } from './validation';
import { transactionIdForJob } from '../transactions/repo';
import { lapseOf, presign } from '../storage/presign';

export interface InitInput {
  readonly network: Network;
  readonly title: string;
  readonly filename: string;
  readonly creators: Creator[];
  readonly external_user_ref?: string;
}

/** Version init (docs/api.md#versions-init) and init-upload (docs/api.md#versions-init-upload): no title, the work keeps its own. */
export interface VersionInitInput {
  readonly network: Network;
  readonly filename?: string;
  readonly creators: Creator[];
  readonly external_user_ref?: string;
}

export interface UploadJob {
  readonly job_id: string;
  readonly upload_url: string;
  readonly upload_expires_at: string;
}

export const audioKey = (organizationId: string, jobId: string) => `audio/${organizationId}/${jobId}`;

/** What registration's calls use: the web's handles. */
export interface RegistrationDeps {
  readonly db: Knex;
  readonly redis: Redis;
  readonly storage: Storage;
  readonly queues: Queues;
  readonly log: Logger;
  readonly config: Pick<Config, 'redis' | 'ttl' | 'chains' | 'prepareTimeoutMs'>;
  /** Completion events of the prepare queue (a prepare waits on its run). */
  prepareEvents(): QueueEvents;
}

/** One store per Redis connection and prefix, made on first use: a request makes none. */
const stores = new WeakMap<Redis, Map<string, JobStore>>();

export function jobStore(app: { readonly redis: Redis; readonly config: Pick<Config, 'redis'> }): JobStore {
  const { prefix } = app.config.redis;
  let byPrefix = stores.get(app.redis);
  if (!byPrefix) stores.set(app.redis, (byPrefix = new Map()));
  let store = byPrefix.get(prefix);
  if (!store) byPrefix.set(prefix, (store = new JobStore(app.redis, prefix)));
  return store;
}

/**
 * Init (docs/api.md#registration-init), offered to the key check: the upload session is reserved in the check's own round trip
 * once the caller is admitted (api-keys/key-cache.ts), else by `answer`; then the PUT of its one object key is
 * presigned.
 */
export function admitRegistration(app: RegistrationDeps, input: InitInput): Admission<UploadJob> {
  assertValid([
    ...networkProblems(app.config, input.network),
    ...titleProblems(input.title),
    ...filenameProblems(input.filename),
    ...creatorProblems(input.creators),
    ...refProblems(input.external_user_ref),
  ]);
  return new RegistrationAdmission(app, input, randomUUID(), new Date());
}

/** A registration's init once valid: a class, not closures, since each closure an init made cost it µs under tsx. */
class RegistrationAdmission implements Admission<UploadJob> {
  readonly commands: Admission<UploadJob>['commands'];
  private readonly ttl: number;
  private readonly createdAt: string;
  private readonly uploadExpiresAt: string;

  constructor(
    private readonly app: RegistrationDeps,
    private readonly input: InitInput,
    private readonly jobId: string,
    private readonly now: Date,
  ) {
    this.ttl = app.config.ttl.uploadSeconds;
    this.createdAt = now.toISOString();
    this.uploadExpiresAt = lapseOf(now, this.ttl).toISOString();
    this.commands = jobStore(app).reserveCommands(this.session(ADMITTED.organizationId, ADMITTED.apiKeyId), this.ttl);
  }

  /** The session is built again only when the key check did not write it (PostgreSQL answered). */
  async answer(principal: Principal, written: boolean): Promise<UploadJob> {
    if (!written) await jobStore(this.app).reserve(this.session(principal.organizationId, principal.apiKeyId), this.ttl);
    // signed at the session's own time, so the URL lapses at the upload_expires_at it is told with
    const url = await presign(this.app.storage, 'PUT', audioKey(principal.organizationId, this.jobId), this.ttl, this.now);
    return { job_id: this.jobId, upload_url: url, upload_expires_at: this.uploadExpiresAt };
  }

  private session(organizationId: string, apiKeyId: string): UploadSession {
    const { input, jobId } = this;
    return {
      jobId,
      kind: 'register',
      organizationId,
      apiKeyId,
      network: input.network,
      title: input.title.trim(),
      filename: input.filename,
      creators: input.creators,
      externalUserRef: input.external_user_ref ?? null,
      audioKey: audioKey(organizationId, jobId),
      createdAt: this.createdAt,
      uploadExpiresAt: this.uploadExpiresAt,
    };
  }
}

/** Init with its session reserved apart from the key check. */
export const initRegistration = (app: RegistrationDeps, principal: Principal, input: InitInput): Promise<UploadJob> =>
  admitRegistration(app, input).answer(principal, false);

/**
 * The work a version write targets (docs/api.md#external-user-references): the organization's work with this `ats_id` on
 * the network (another organization's, or none: 404). A write carrying a ref must carry the work's own ref
 * (a ref sent for an untagged work is a mismatch too): 403. A write without a ref reaches any work.
 */
export async function versionTarget(app: RegistrationDeps, principal: Principal, network: Network, atsId: number, ref: string | undefined) {
  const work = await workOnNetworkOf(app.db, principal.organizationId, network, atsId);
  if (!work) throw notFound('Work');
  if (ref !== undefined && ref !== work.externalUserRef) {
    throw new AppError('common.forbidden', 'external_user_ref does not match the work (a work keeps the ref it was registered with)');
  }
  return work;
}

/**
 * Reserves a version: with `filename`, an upload session like registration's (init-upload); without, a
 * metadata-only version reusing the audio the latest version anchored (init), and no upload URL.
 */
export async function initVersion(
  app: RegistrationDeps,
  principal: Principal,
  atsId: number,
  input: VersionInitInput,
): Promise<UploadJob | { job_id: string }> {
  assertValid([
    ...networkProblems(app.config, input.network),
    ...(input.filename !== undefined ? filenameProblems(input.filename) : []),
    ...creatorProblems(input.creators),
    ...refProblems(input.external_user_ref),
  ]);
  const work = await versionTarget(app, principal, input.network, atsId, input.external_user_ref);
  const latest = (await latestVersion(app.db, work.id))!;
  const jobId = randomUUID();
  const now = new Date();
  const ttl = app.config.ttl.uploadSeconds;
  const base = {
    jobId,
    kind: 'add_version' as const,
    organizationId: principal.organizationId,
    apiKeyId: principal.apiKeyId,
    network: input.network,
    title: work.title,
    creators: input.creators,
    // the work's own ref, whether or not the write named it: a work never gains, loses or changes its ref
    externalUserRef: work.externalUserRef,
    createdAt: now.toISOString(),
    uploadExpiresAt: lapseOf(now, ttl).toISOString(),
    workId: work.id,
    atsId: work.atsId,
  };
  if (input.filename !== undefined) {
    return reserveUpload(app, { ...base, filename: input.filename, audioKey: audioKey(principal.organizationId, jobId) }, ttl);
  }
  const session: UploadSession = {
    ...base,
    filename: latest.filename,
    audioKey: latest.audioKey,
    reusedAudio: { mediaHash: latest.mediaHash, size: latest.audioSize },
  };
  await jobStore(app).reserve(session, ttl);
  return { job_id: jobId };
}

export async function reserveUpload(app: RegistrationDeps, session: UploadSession, ttlSeconds: number): Promise<UploadJob> {
  const url = await presign(app.storage, 'PUT', session.audioKey, ttlSeconds, new Date(session.createdAt));
  await jobStore(app).reserve(session, ttlSeconds);
  return { job_id: session.jobId, upload_url: url, upload_expires_at: session.uploadExpiresAt };
}

/** The outcome a prepare job returns: a quote, or the domain error to answer with. */
export type PrepareOutcome = { ok: true; quote: PreparedQuote } | { ok: false; code: ErrorCode; message: string };

export const sessionNotFound = () =>
  new AppError('registration.upload_session_not_found', 'No upload session with this job_id (unknown, expired, or already confirmed)');

/** The job's session when it is of this kind (and, for a version, of this work); else the job is not found here. */
export async function sessionOf(
  store: JobStore,
  principal: Principal,
  jobId: string,
  kind: UploadSession['kind'],
  atsId: number | undefined,
) {
  const job = await store.load(principal.organizationId, jobId);
  if (!job || job.session.kind !== kind || (kind === 'add_version' && job.session.atsId !== atsId)) return undefined;
  return job.session;
}

/**
 * A confirm hold whose process died before it moved the job on: PostgreSQL (one transaction per job id)
 * says whether its debit committed, and the job becomes `confirmed` or `prepared` accordingly.
 */
export async function settleLapsedConfirm(app: RegistrationDeps, store: JobStore, session: UploadSession): Promise<void> {
  if (await transactionIdForJob(app.db, session.jobId)) await store.finishConfirm(session.organizationId, session.jobId, session.audioKey);
  else await store.revertConfirm(session.organizationId, session.jobId);
}

/**
 * Prepare (docs/api.md#registration-prepare): the web hands the hashing and the chain dry run to a `prepare` worker and waits for
 * its answer, bounded. The worker stores the quote in the job; a prepare of a job whose run is under way
 * waits on that same run, so concurrent prepares hash once and answer one quote.
 */
export async function prepareJob(
  app: RegistrationDeps,
  principal: Principal,
  jobId: string,
  kind: UploadSession['kind'],
  atsId?: number,
): Promise<PreparedQuote> {
  const store = jobStore(app);
  const session = await sessionOf(store, principal, jobId, kind, atsId);
  if (!session) throw sessionNotFound();
  let begun = await store.beginPrepare(principal.organizationId, jobId, app.config.prepareTimeoutMs);
  if (begun.kind === 'lapsed') {
    await settleLapsedConfirm(app, store, session);
    begun = await store.beginPrepare(principal.organizationId, jobId, app.config.prepareTimeoutMs);
  }
  if (begun.kind !== 'start' && begun.kind !== 'join') throw sessionNotFound();
  const events = app.prepareEvents();
  await events.waitUntilReady();
  const job = await enqueuePrepare(app.queues, { organizationId: principal.organizationId, jobId, run: begun.run });
  let outcome: PrepareOutcome;
  try {
    outcome = (await job.waitUntilFinished(events, app.config.prepareTimeoutMs)) as PrepareOutcome;
  } catch (err) {
    const timedOut = /timed out/i.test((err as Error).message);
    app.log.error({ err: { message: (err as Error).message }, job_id: jobId }, timedOut ? 'prepare timed out' : 'prepare failed');
    const message = timedOut
      ? 'Preparing the quote took too long; retry shortly'
      : 'The quote could not be prepared right now; retry shortly';
    throw new AppError('common.service_unavailable', message, undefined, { 'Retry-After': '5' });
  }
  if (!outcome.ok) throw new AppError(outcome.code, outcome.message);
  return outcome.quote;
}
