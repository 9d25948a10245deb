import { useStack } from '../helpers/workers';
import { runFuzz } from '../fuzz/property';
import { fuzzTarget } from '../fuzz/target';
import { failWithin } from '../../shared/transactions/outcomes';

// A sample of `npm run fuzz` (which runs 10,000 cases) in every test run; a fixed seed keeps it repeatable.
describe('hostile requests on every documented route (sample)', function () {
  this.timeout(300_000);
  const stack = useStack({ env: { REDIS_PREFIX: `fuzz_${Date.now()}` }, queues: ['prepare'] });
  let organizationId: string | undefined;

  // the target's registration is confirmed with no chain worker to carry it: ended here (failed, refunded), so that no
  // later test's reconciler, in the shared database, takes it up (after each test: the stack's after closes the database)
  afterEach(async () => {
    if (!organizationId) return;
    const { db } = stack.app.context;
    await db.transaction(async (trx) => {
      const unfinished = await trx('transactions')
        .where({ organization_id: organizationId })
        .whereIn('status', ['pending', 'submitted', 'in_block'])
        .pluck('id');
      for (const id of unfinished) await failWithin(trx, stack.app.context, id, 'test.ended', 'the fuzz test ended');
    });
  });

  it('no 5xx, every 4xx a documented envelope, nothing changed by a rejected request, the server up', async () => {
    const target = await fuzzTarget(stack.app);
    organizationId = target.ids.organizationId;
    await runFuzz(target, { numRuns: 300, seed: 20261122 });
  });
});
