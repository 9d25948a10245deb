import Router from '@koa/router';
import type { Resources } from '../../../shared/resources';
import type { Principal } from '../../../shared/api-keys/types';
import { getTransaction } from '../../../shared/transactions/service';
import { requirePrincipal } from '../../middleware/auth';

/** REST polling of a transaction (spec 4.11, contract §6): any key of the owning organization, or its ref's session. */
export function transactionsRouter(app: Resources): Router {
  const router = new Router();
  router.get(
    '/v1/transactions/:transaction_id',
    requirePrincipal({ db: app.db, secretsKey: app.config.secrets.key, log: app.log }, { allowSession: true }),
    async (ctx) => {
      ctx.body = await getTransaction(app.db, ctx.state.principal as Principal, ctx.params.transaction_id as string);
    },
  );
  return router;
}
