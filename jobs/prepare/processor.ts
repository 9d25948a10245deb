import type { Processor } from 'bullmq';
import type { AppContext } from '../../shared/context';
import { AnchorService } from '../../shared/chain/anchors';
import { prepareQuote } from '../../shared/registration/prepare';

/** Hashes the upload and prices the quote; the web waiting on the job answers with the returned outcome. */
export const prepareProcessor = (app: AppContext): Processor => {
  const anchors = new AnchorService(app.chains);
  return async (job) => prepareQuote({ app, anchors }, job.data.organizationId as string, job.data.jobId as string, Number(job.data.run));
};
