import type { Resources } from '../../shared/resources';
import type { QueueProcessor } from '../workers';
import type { JobData } from '../../shared/queue/jobs';
import { AnchorService } from '../../shared/chain/anchors';
import { advanceTransaction } from '../../shared/transactions/pipeline';
import { RelayerSubmitter } from '../../shared/transactions/submitter';

/**
 * Carries a confirmed transaction to finality (or a refunded failure); a thrown error retries the job.
 * One submitter per process; across processes the relayer's advisory lock lets one submit at a time. A job
 * leaves the submitter's round once its own call has moved on, so on shutdown the worker also waits for the
 * round to end.
 */
export const chainProcessor = (app: Resources): QueueProcessor<JobData['chain']> => {
  const anchors = new AnchorService(app.chains);
  const submitter = new RelayerSubmitter(app, anchors);
  return {
    process: async (job) => {
      const tx = await advanceTransaction({ app, anchors, submitter }, job.data.transactionId);
      return { status: tx.status };
    },
    settle: () => submitter.settle(),
  };
};
