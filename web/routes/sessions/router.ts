import Router from '@koa/router';
import type { Resources } from '../../../shared/resources';
import { issueSession } from '../../../shared/sessions/service';
import type { Principal } from '../../../shared/api-keys/types';
import { requirePrincipal } from '../../middleware/auth';
import { validateBody } from '../../middleware/validate';
import { createSessionSchema } from './schemas';

/** End-user sessions (contract §8): a key with `works:read` issues one (a session only reads). */
export function sessionsRouter(app: Resources): Router {
  const router = new Router();
  router.post(
    '/v1/sessions',
    requirePrincipal({ db: app.db, secretsKey: app.config.secrets.key, log: app.log }, { scope: 'works:read' }),
    validateBody(createSessionSchema, { code: 'session.invalid_external_user_ref' }),
    async (ctx) => {
      const { external_user_ref } = ctx.state.body as { external_user_ref: string };
      ctx.set('Cache-Control', 'no-store');
      ctx.status = 201;
      ctx.body = await issueSession(
        { db: app.db, secretsKey: app.config.secrets.key, ttlSeconds: app.config.sessions.ttlSeconds },
        ctx.state.principal as Principal,
        external_user_ref,
      );
    },
  );
  return router;
}
