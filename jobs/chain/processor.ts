import type { Processor } from 'bullmq';
import type { AppContext } from '../../shared/context';
import { AnchorService } from '../../shared/chain/anchors';
import { advanceTransaction } from '../../shared/transactions/pipeline';

/** Carries a confirmed transaction to finality (or a refunded failure); a thrown error retries the job. */
export const chainProcessor = (app: AppContext): Processor => {
  const anchors = new AnchorService(app.chains);
  return async (job) => {
    const tx = await advanceTransaction({ app, anchors }, job.data.transactionId as string);
    return { status: tx.status };
  };
};
