import type { Processor } from 'bullmq';
import type { AppContext } from '../../shared/context';
import { AnchorService } from '../../shared/chain/anchors';
import { advanceTransaction } from '../../shared/transactions/pipeline';
import { RelayerSubmitter } from '../../shared/transactions/submitter';

/**
 * Carries a confirmed transaction to finality (or a refunded failure); a thrown error retries the job.
 * One submitter per process; across processes the relayer's advisory lock lets one submit at a time.
 */
export const chainProcessor = (app: AppContext): Processor => {
  const anchors = new AnchorService(app.chains);
  const submitter = new RelayerSubmitter(app, anchors);
  return async (job) => {
    const tx = await advanceTransaction({ app, anchors, submitter }, job.data.transactionId as string);
    return { status: tx.status };
  };
};
