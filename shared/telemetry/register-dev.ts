import { startTelemetry } from './sdk';

// Imported first by the dev entry point, before anything that loads an instrumented library (sdk.ts).
startTelemetry('dev');
