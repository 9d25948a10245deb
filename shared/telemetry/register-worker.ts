import { startTelemetry } from './sdk';

// Imported first by the worker entry point, before anything that loads an instrumented library (sdk.ts).
startTelemetry('worker');
