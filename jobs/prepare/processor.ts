import type { Processor } from 'bullmq';
import type { Resources } from '../../shared/resources';
import type { JobData } from '../../shared/queue/jobs';
import { AnchorService } from '../../shared/chain/anchors';
import { prepareQuote } from '../../shared/registration/prepare';

/** Hashes the upload and prices the quote; the web waiting on the job answers with the returned outcome. */
export const prepareProcessor = (app: Resources): Processor<JobData['prepare']> => {
  const anchors = new AnchorService(app.chains);
  return async (job) => prepareQuote(app, anchors, job.data.organizationId, job.data.jobId, job.data.run);
};
