import { startTestServices, stopTestServices } from './services';

/** Mocha root hooks: one set of real dependencies for the whole run. */
export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(180_000);
    await startTestServices();
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await stopTestServices();
  },
};
