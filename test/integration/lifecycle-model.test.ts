import { expect } from 'chai';
import { useStack } from '../helpers/workers';
import { lifecycleTarget, runLifecycle } from '../lifecycle/model';

/**
 * The job lifecycle's model-based test (test/lifecycle/model.ts), a fixed-seed sample; `npm run fuzz --
 * --lifecycle --runs N` runs more.
 */
describe('the job lifecycle against a model: random orders, repeats and races', function () {
  this.timeout(900_000);
  const stack = useStack({ env: { REDIS_PREFIX: `lifecycle_${Date.now()}` } });

  it('charges each job once, anchors it once, ends every transaction, never answers 5xx (6 sequences, seed 1616)', async () => {
    const target = await lifecycleTarget(stack.app);
    try {
      const stats = await runLifecycle(target, { numRuns: 6, seed: 1616 });
      process.stdout.write(`      ${stats.sequences} sequences, ${stats.commands} commands drawn, ${stats.requests} requests\n`);
      expect(stats.sequences).to.equal(6);
      expect(stats.requests).to.be.greaterThan(6);
    } finally {
      await target.close();
    }
  });
});
