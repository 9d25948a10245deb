import os from 'node:os';
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import { startTestServices, stopTestServices } from './services';
import { logLines } from './app';
import { checkWholeRun } from './suite-checks';

/**
 * Mocha root hooks: one set of real dependencies for the whole run, and the checks over the whole run (every
 * response against the OpenAPI document, no credential in any log line: test/helpers/suite-checks.ts).
 */
export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(180_000);
    await startTestServices();
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    // the run's logs, for reading after a failure
    writeFileSync(path.join(os.tmpdir(), 'works-api-test.log'), logLines.join('\n') + '\n');
    // after every file, whatever ran and in what order: a violation fails this hook, and so the run
    try {
      await checkWholeRun();
    } finally {
      await stopTestServices();
    }
  },
};
