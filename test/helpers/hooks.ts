import os from 'node:os';
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import { startTestServices, stopTestServices } from './services';
import { logLines } from './app';

/** Mocha root hooks: one set of real dependencies for the whole run. */
export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(180_000);
    await startTestServices();
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    // the run's logs, for reading after a failure
    writeFileSync(path.join(os.tmpdir(), 'works-api-test.log'), logLines.join('\n') + '\n');
    await stopTestServices();
  },
};
