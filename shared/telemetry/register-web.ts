import { startTelemetry } from './sdk';

// Imported first by the web entry point, before anything that loads an instrumented library (sdk.ts).
startTelemetry('web');
