import type { ProcessorRegistry } from './workers';

/** The processor of each queue. A queue appears here once its processor exists. */
export const PROCESSORS: ProcessorRegistry = {};
