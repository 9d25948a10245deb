import type { ProcessorRegistry } from './workers';
import { prepareProcessor } from './prepare/processor';
import { chainProcessor } from './chain/processor';
import { webhooksProcessor } from './webhooks/processor';
import { webhooksDeadProcessor } from './webhooks-dead/processor';
import { maintenanceProcessor } from './maintenance/processor';
import { certificatesProcessor } from './certificates/processor';

/** The processor of each queue. A queue appears here once its processor exists. */
export const PROCESSORS: ProcessorRegistry = {
  prepare: prepareProcessor,
  chain: chainProcessor,
  webhooks: webhooksProcessor,
  'webhooks-dead': webhooksDeadProcessor,
  maintenance: maintenanceProcessor,
  certificates: certificatesProcessor,
};
