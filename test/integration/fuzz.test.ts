import { useStack } from '../helpers/workers';
import { runFuzz } from '../fuzz/property';
import { fuzzTarget } from '../fuzz/target';

// A sample of `npm run fuzz` (which runs 10,000 cases) in every test run; a fixed seed keeps it repeatable.
describe('hostile requests on every documented route (sample)', function () {
  this.timeout(300_000);
  const stack = useStack({ env: { REDIS_PREFIX: `fuzz_${Date.now()}` }, queues: ['prepare'] });

  it('no 5xx, every 4xx a documented envelope, nothing changed by a rejected request, the server up', async () => {
    await runFuzz(await fuzzTarget(stack.app), { numRuns: 300, seed: 20261122 });
  });
});
