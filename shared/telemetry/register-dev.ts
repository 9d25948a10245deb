import { startTracingIfRequested } from './start';

// Imported first by the dev entry point, before anything that loads an instrumented library (sdk.ts).
startTracingIfRequested('dev');
