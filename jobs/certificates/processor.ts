import { UnrecoverableError, type Processor } from 'bullmq';
import type { Resources } from '../../shared/resources';
import type { JobData } from '../../shared/queue/jobs';
import { renderCertificateOf } from '../../shared/certificates/service';

/**
 * Renders a finalized version's certificate into S3 (job data: workId, version). Already there: nothing to
 * do, which a rerun asks S3 (a run before it may have stored it); a first run renders without asking. No such
 * version can only mean a job made by hand: retrying cannot help. S3 or database errors retry.
 */
export const certificatesProcessor =
  (app: Resources): Processor<JobData['certificates']> =>
  async (job) => {
    const { workId, version } = job.data;
    const key = await renderCertificateOf(app, workId, version, job.attemptsMade === 0);
    if (!key) throw new UnrecoverableError(`no finalized version ${version} of work ${workId}`);
    return { key };
  };
