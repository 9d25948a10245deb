import Router from '@koa/router';
import type { Middleware } from 'koa';
import type { AppContext } from '../../../shared/context';
import type { Principal } from '../../../shared/api-keys/types';
import { OrganizationRateLimiter } from '../../../shared/rate-limit/service';
import { confirmJob, initRegistration, prepareJob, type InitInput } from '../../../shared/registration/service';
import { requirePrincipal } from '../../middleware/auth';
import { validateBody } from '../../middleware/validate';
import { idempotent } from '../../middleware/idempotency';
import { initRegistrationSchema, jobIdSchema } from './schemas';
import { presentRegistrationQuote } from './presenters';

/** Registration (spec 4.1–4.4): init, prepare, confirm. */
export function worksRouter(app: AppContext): Router {
  const router = new Router({ prefix: '/v1/works' });
  const auth = requirePrincipal({ db: app.db, secretsKey: app.config.secrets.key, log: app.log }, { scope: 'works:register' });
  const limiter = new OrganizationRateLimiter(app.redis, app.config.redis.prefix, app.config.rateLimit.perSecond, app.config.rateLimit.burst);
  const rateLimited: Middleware = async (ctx, next) => {
    await limiter.take((ctx.state.principal as Principal).organizationId);
    await next();
  };

  router.post('/init', auth, validateBody(initRegistrationSchema), rateLimited, idempotent(app), async (ctx) => {
    ctx.body = await initRegistration(app, ctx.state.principal as Principal, ctx.state.body as InitInput);
  });

  router.post('/prepare', auth, validateBody(jobIdSchema), async (ctx) => {
    const quote = await prepareJob(app, ctx.state.principal as Principal, (ctx.state.body as { job_id: string }).job_id, 'register');
    ctx.body = presentRegistrationQuote(quote);
  });

  router.post('/confirm', auth, validateBody(jobIdSchema), async (ctx) => {
    ctx.status = 202;
    ctx.body = await confirmJob(app, ctx.state.principal as Principal, (ctx.state.body as { job_id: string }).job_id, 'register');
  });
  return router;
}
