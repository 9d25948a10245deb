import { DeleteObjectsCommand } from '@aws-sdk/client-s3';
import type { Config } from '../config';
import type { Redis } from '../redis/client';
import type { Knex } from 'knex';
import type { Storage } from '../storage/s3';
import { confirmedJobIds } from '../transactions/repo';
import { jobStore } from './service';

const PAGE = 500;
const AUDIO_KEY = /^audio\/([0-9a-f-]{36})\/([0-9a-f-]{36})$/;

/**
 * Deletes the uploads nobody can confirm any more: their URL expired and their job is gone (a job outlives
 * its quote and any confirm in flight, job-store.ts), and no transaction was confirmed from them. A confirmed
 * upload belongs to its transaction and is only taken out of the set. Returns how many objects were deleted.
 */
export async function sweepUploads(app: {
  readonly redis: Redis;
  readonly config: Pick<Config, 'redis'>;
  readonly db: Knex;
  readonly storage: Storage;
}): Promise<number> {
  const store = jobStore(app);
  let deleted = 0;
  for (;;) {
    const expired = await store.expiredUploads(Date.now(), PAGE);
    const ended = [];
    for (const audioKey of expired) {
      const [, organizationId, jobId] = AUDIO_KEY.exec(audioKey) ?? [];
      if (organizationId && jobId && (await store.exists(organizationId, jobId))) continue;
      ended.push({ audioKey, jobId });
    }
    if (!ended.length) return deleted;
    const jobIds = ended.flatMap((e) => (e.jobId ? [e.jobId] : []));
    const confirmed = await confirmedJobIds(app.db, jobIds);
    const orphans = ended.filter((e) => !e.jobId || !confirmed.has(e.jobId)).map((e) => e.audioKey);
    if (orphans.length) {
      const out = await app.storage.client.send(
        new DeleteObjectsCommand({ Bucket: app.storage.bucket, Delete: { Objects: orphans.map((Key) => ({ Key })), Quiet: true } }),
      );
      if (out.Errors?.length) throw new Error(`deleting expired uploads: ${out.Errors.map((e) => `${e.Key} ${e.Code}`).join(', ')}`);
      deleted += orphans.length;
    }
    await store.forgetUploads(ended.map((e) => e.audioKey));
    if (expired.length < PAGE) return deleted;
  }
}
