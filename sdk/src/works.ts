import { RegistrationError, WorksApiError, type RegistrationStage } from './errors';
import { AttemptFailed, networkError, withRetries } from './retry';
import type { Transport } from './transport';
import type {
  Download,
  ListWorksQuery,
  Network,
  RegistrationQuote,
  TransactionHandle,
  UploadJob,
  VersionJob,
  VersionMetadata,
  VersionQuote,
  VersionUploadMetadata,
  Work,
  WorkCreators,
  WorkDetail,
  WorkMetadata,
  WorksPage,
  WorkVersions,
} from './types';

/**
 * Audio to upload: bytes (retried when the connection never opened), or a stream (sent once; give
 * `contentLength` too, as S3 needs it for a presigned PUT).
 */
export type Audio = Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

export interface UploadOptions {
  /** The stream's length in bytes, sent as Content-Length (known for bytes and Blobs). */
  readonly contentLength?: number;
}

export interface WriteOptions {
  /**
   * The write's Idempotency-Key; a fresh UUID by default. Give your own to make a write idempotent across processes.
   * A failed init's `WorksApiError` carries the key it sent as `idempotencyKey`, to give back here on a later retry.
   */
  readonly idempotencyKey?: string;
}

/** A finished registration or version flow: the confirmed transaction's handle, with the job and its quote. */
export type Confirmed<Q> = TransactionHandle & { readonly job_id: string; readonly quote: Q };

/** The listing, one work at a time (`for await`); `pages()` gives whole pages with their `total_count`. */
export interface WorkListing extends AsyncIterable<Work> {
  pages(): AsyncIterable<WorksPage>;
}

/** Where a detail route looks: `network`, needed only when the work's ats_id exists on both. */
export interface WorkLookup {
  readonly network?: Network;
}

const jobIdOf = (job: string | { readonly job_id: string }) => (typeof job === 'string' ? job : job.job_id);
const newKey = () => globalThis.crypto.randomUUID();

/** Runs one step of a flow, a `WorksApiError` it throws rethrown as a `RegistrationError` saying where it stopped. */
async function step<T, Q>(progress: { stage: RegistrationStage; jobId?: string; quote?: Q }, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    throw err instanceof WorksApiError ? new RegistrationError<Q>(err, progress) : err;
  }
}

function isReplayable(audio: Audio): audio is Uint8Array | ArrayBuffer | Blob {
  return audio instanceof Uint8Array || audio instanceof ArrayBuffer || (typeof Blob !== 'undefined' && audio instanceof Blob);
}

/** `works.*` of the client: registration, versions, the read side and downloads. */
export function worksApi(t: Transport) {
  const { api } = t;
  const versionPath = (atsId: number) => ({ path: { ats_id: String(atsId) } });

  async function upload(job: Pick<UploadJob, 'upload_url'>, audio: Audio, options: UploadOptions = {}): Promise<void> {
    const replayable = isReplayable(audio);
    const length =
      options.contentLength ?? (audio instanceof Blob ? audio.size : replayable ? (audio as ArrayBuffer).byteLength : undefined);
    const init: RequestInit & { duplex?: 'half' } = {
      method: 'PUT',
      body: audio as BodyInit,
      headers: length === undefined ? {} : { 'Content-Length': String(length) },
      ...(replayable ? {} : { duplex: 'half' }),
    };
    // the presigned URL takes one write: retried only when the connection never opened, and a stream not at all
    await withRetries(replayable ? t.retry : false, 'once', async (attempt) => {
      let response: Response;
      try {
        response = await t.fetch(job.upload_url, init);
      } catch (err) {
        const { error, sent } = networkError(err, attempt, { write: true });
        throw new AttemptFailed(error, sent);
      }
      if (response.ok) return;
      const text = await response.text().catch(() => '');
      const error = new WorksApiError({
        status: response.status,
        code: 'upload.failed',
        message: `The upload was refused: HTTP ${response.status} ${text.slice(0, 300)}`,
        attempts: attempt,
        requestSent: true,
      });
      throw new AttemptFailed(error, true);
    });
  }

  const works = {
    /** Reserves an upload for a new work (docs/api.md#registration-init), with an Idempotency-Key reused on every retry. */
    init: (metadata: WorkMetadata, options: WriteOptions = {}): Promise<UploadJob> => {
      const key = options.idempotencyKey ?? newKey();
      return t.call('repeatable', () => api.POST('/v1/works/init', { body: metadata, params: { header: { 'Idempotency-Key': key } } }), {
        write: true,
        idempotencyKey: key,
      });
    },

    /** PUTs the audio to the job's presigned URL. */
    upload,

    /** Hashes the upload and quotes a binding price (docs/api.md#registration-prepare); again before confirm replaces the quote. */
    prepare: (job: string | { readonly job_id: string }): Promise<RegistrationQuote> =>
      t.call('repeatable', () => api.POST('/v1/works/prepare', { body: { job_id: jobIdOf(job) } }), { write: true }),

    /**
     * Accepts the quote and starts the chain transaction (docs/api.md#registration-confirm). Not retried once sent: see `Safety`. A
     * `network.outcome_unknown` failure may have started the transaction: see `RegistrationError`.
     */
    confirm: (job: string | { readonly job_id: string }): Promise<TransactionHandle> =>
      t.call('once', () => api.POST('/v1/works/confirm', { body: { job_id: jobIdOf(job) } }), { write: true }),

    /**
     * The whole registration: init, upload, prepare, confirm. Wait for it with `transactions.wait(transaction_id)`.
     * Throws a `RegistrationError` (`stage`, `jobId`, `quote`): never retry `register` blindly, as a second
     * registration is charged again; resume from where it stopped.
     */
    register: async (
      metadata: WorkMetadata,
      audio: Audio,
      options: WriteOptions & UploadOptions = {},
    ): Promise<Confirmed<RegistrationQuote>> => {
      const job = await step({ stage: 'init' }, () => works.init(metadata, options));
      const jobId = job.job_id;
      await step({ stage: 'upload', jobId }, () => upload(job, audio, options));
      const quote = await step({ stage: 'prepare', jobId }, () => works.prepare(jobId));
      const handle = await step({ stage: 'confirm', jobId, quote }, () => works.confirm(jobId));
      return { ...handle, job_id: jobId, quote };
    },

    versions: {
      /** Reserves a metadata-only version reusing the anchored audio (docs/api.md#versions-init), idempotent like `init`. */
      init: (atsId: number, metadata: VersionMetadata, options: WriteOptions = {}): Promise<VersionJob> => {
        const key = options.idempotencyKey ?? newKey();
        return t.call(
          'repeatable',
          () =>
            api.POST('/v1/works/{ats_id}/versions/init', {
              body: metadata,
              params: { ...versionPath(atsId), header: { 'Idempotency-Key': key } },
            }),
          { write: true, idempotencyKey: key },
        );
      },
      /** Reserves a version with new audio and a presigned PUT URL (docs/api.md#versions-init-upload), idempotent like `init`. */
      initUpload: (atsId: number, metadata: VersionUploadMetadata, options: WriteOptions = {}): Promise<UploadJob> => {
        const key = options.idempotencyKey ?? newKey();
        return t.call(
          'repeatable',
          () =>
            api.POST('/v1/works/{ats_id}/versions/init-upload', {
              body: metadata,
              params: { ...versionPath(atsId), header: { 'Idempotency-Key': key } },
            }),
          { write: true, idempotencyKey: key },
        );
      },
      /** Quotes a version (docs/api.md#versions-prepare-and-confirm). */
      prepare: (atsId: number, job: string | { readonly job_id: string }): Promise<VersionQuote> =>
        t.call(
          'repeatable',
          () => api.POST('/v1/works/{ats_id}/versions/prepare', { body: { job_id: jobIdOf(job) }, params: versionPath(atsId) }),
          { write: true },
        ),
      /** Accepts a version quote (docs/api.md#versions-prepare-and-confirm). Not retried once sent. */
      confirm: (atsId: number, job: string | { readonly job_id: string }): Promise<TransactionHandle> =>
        t.call(
          'once',
          () => api.POST('/v1/works/{ats_id}/versions/confirm', { body: { job_id: jobIdOf(job) }, params: versionPath(atsId) }),
          { write: true },
        ),
      /** Every finalized version of the work, oldest first. */
      list: (atsId: number, lookup: WorkLookup = {}): Promise<WorkVersions> =>
        t.call('repeatable', () => api.GET('/v1/works/{ats_id}/versions', { params: { ...versionPath(atsId), query: lookup } })),
    },

    /**
     * The whole version flow: metadata only (`init`) without audio, else `initUpload` (metadata with a filename)
     * and the upload; then prepare and confirm. Throws a `RegistrationError` like `register`.
     */
    addVersion: async (
      atsId: number,
      metadata: VersionMetadata | VersionUploadMetadata,
      audio?: Audio,
      options: WriteOptions & UploadOptions = {},
    ): Promise<Confirmed<VersionQuote>> => {
      let jobId: string;
      if (audio === undefined) {
        jobId = (await step({ stage: 'init' }, () => works.versions.init(atsId, metadata, options))).job_id;
      } else {
        if (!('filename' in metadata) || typeof metadata.filename !== 'string')
          throw new TypeError('a version with new audio needs a filename');
        const job = await step({ stage: 'init' }, () => works.versions.initUpload(atsId, metadata as VersionUploadMetadata, options));
        jobId = job.job_id;
        await step({ stage: 'upload', jobId }, () => upload(job, audio, options));
      }
      const quote = await step({ stage: 'prepare', jobId }, () => works.versions.prepare(atsId, jobId));
      const handle = await step({ stage: 'confirm', jobId, quote }, () => works.versions.confirm(atsId, jobId));
      return { ...handle, job_id: jobId, quote };
    },

    /** The organization's works, newest first, page after page as it is iterated (docs/api.md#listing-and-cursors). */
    list: (query: ListWorksQuery = {}): WorkListing => {
      async function* pages(): AsyncGenerator<WorksPage> {
        let after = query.after;
        for (;;) {
          const page: WorksPage = await t.call('repeatable', () => api.GET('/v1/works', { params: { query: { ...query, after } } }));
          yield page;
          if (!page.page_info.has_next_page || !page.page_info.end_cursor) return;
          after = page.page_info.end_cursor;
        }
      }
      return {
        pages,
        async *[Symbol.asyncIterator]() {
          for await (const page of pages()) yield* page.works;
        },
      };
    },

    /** A work by ats_id (docs/api.md#work-detail). */
    get: (atsId: number, lookup: WorkLookup = {}): Promise<WorkDetail> =>
      t.call('repeatable', () => api.GET('/v1/works/{ats_id}', { params: { ...versionPath(atsId), query: lookup } })),

    /** The creators of the latest version, or of `version`. */
    creators: (atsId: number, lookup: WorkLookup & { readonly version?: number } = {}): Promise<WorkCreators> =>
      t.call('repeatable', () => api.GET('/v1/works/{ats_id}/creators', { params: { ...versionPath(atsId), query: lookup } })),

    /** Presigned GET URLs (10 minutes) of a work's files, by the work's id (`Work.id`); the latest version without `version`. */
    downloads: {
      audio: (workId: string, options: { readonly version?: number } = {}): Promise<Download> =>
        options.version === undefined
          ? t.call('repeatable', () => api.GET('/v1/works/{work_uuid}/download/asset', { params: { path: { work_uuid: workId } } }))
          : t.call('repeatable', () =>
              api.GET('/v1/works/{work_uuid}/versions/{v}/download/audio', {
                params: { path: { work_uuid: workId, v: String(options.version) } },
              }),
            ),
      certificate: (workId: string, options: { readonly version?: number } = {}): Promise<Download> =>
        options.version === undefined
          ? t.call('repeatable', () => api.GET('/v1/works/{work_uuid}/download/certificate', { params: { path: { work_uuid: workId } } }))
          : t.call('repeatable', () =>
              api.GET('/v1/works/{work_uuid}/versions/{v}/download/certificate', {
                params: { path: { work_uuid: workId, v: String(options.version) } },
              }),
            ),
    },
  };
  return works;
}

export type WorksApi = ReturnType<typeof worksApi>;
