import { UnrecoverableError, type Processor } from 'bullmq';
import type { Resources } from '../../shared/resources';
import type { JobData } from '../../shared/queue/jobs';
import { renderCertificateOf } from '../../shared/certificates/service';

/**
 * Renders a finalized version's certificate into S3 (job data: workId, version). Already there: nothing to
 * do. No such version can only mean a job made by hand: retrying cannot help. S3 or database errors retry.
 */
export const certificatesProcessor =
  (app: Resources): Processor<JobData['certificates']> =>
  async (job) => {
    const { workId, version } = job.data;
    const key = await renderCertificateOf(app, workId, version);
    if (!key) throw new UnrecoverableError(`no finalized version ${version} of work ${workId}`);
    return { key };
  };
