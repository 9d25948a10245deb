import { startTracingIfRequested } from './start';

// Imported first by the web entry point, before anything that loads an instrumented library (sdk.ts).
startTracingIfRequested('web');
