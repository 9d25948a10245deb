import { startTracingIfRequested } from './start';

// Imported first by the worker entry point, before anything that loads an instrumented library (sdk.ts).
startTracingIfRequested('worker');
