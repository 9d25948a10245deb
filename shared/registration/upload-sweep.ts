import { DeleteObjectsCommand } from '@aws-sdk/client-s3';
import type { AppContext } from '../context';
import { jobStore } from './service';

const PAGE = 500;
const AUDIO_KEY = /^audio\/([0-9a-f-]{36})\/([0-9a-f-]{36})$/;

/**
 * Deletes the uploads nobody can confirm any more: their URL expired and their job is gone (a job outlives
 * its quote and any confirm in flight, job-store.ts), and no transaction was confirmed from them. A confirmed
 * upload belongs to its transaction and is only taken out of the set. Returns how many objects were deleted.
 */
export async function sweepUploads(app: Pick<AppContext, 'redis' | 'config' | 'db' | 'storage'>): Promise<number> {
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
    const confirmed = new Set((await app.db('transactions').whereIn('job_id', jobIds).pluck('job_id')) as string[]);
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
