import Router from '@koa/router';
import type { Middleware } from 'koa';
import type { Resources } from '../../../shared/resources';
import type { Principal } from '../../../shared/api-keys/types';
import { OrganizationRateLimiter } from '../../../shared/rate-limit/service';
import { confirmJob, initRegistration, initVersion, prepareJob, type InitInput, type VersionInitInput } from '../../../shared/registration/service';
import { notFound } from '../../../shared/errors';
import { requirePrincipal } from '../../middleware/auth';
import { validateBody } from '../../middleware/validate';
import { idempotent } from '../../middleware/idempotency';
import { initRegistrationSchema, initVersionSchema, initVersionUploadSchema, jobIdSchema } from './schemas';
import { presentRegistrationQuote, presentVersionQuote } from './presenters';

/** The numeric `ats_id` of the path; anything else names no work. */
function atsIdParam(raw: string | undefined): number {
  if (!raw || !/^\d{1,15}$/.test(raw)) throw notFound('Work');
  return Number(raw);
}

/** Registration (spec 4.1–4.4) and versions (4.5–4.7): init, prepare, confirm. */
export function worksRouter(app: Resources): Router {
  const router = new Router({ prefix: '/v1/works' });
  const authDeps = { db: app.db, secretsKey: app.config.secrets.key, log: app.log };
  const auth = requirePrincipal(authDeps, { scope: 'works:register' });
  const updater = requirePrincipal(authDeps, { scope: 'works:update' });
  const limiter = new OrganizationRateLimiter(app.redis, app.config.redis.prefix, app.config.rateLimit.perSecond, app.config.rateLimit.burst);
  const rateLimited: Middleware = async (ctx, next) => {
    await limiter.take((ctx.state.principal as Principal).organizationId);
    await next();
  };

  router.post('/init', auth, validateBody(initRegistrationSchema), rateLimited, idempotent(app), async (ctx) => {
    ctx.body = await initRegistration(app, ctx.state.principal as Principal, ctx.state.body as InitInput);
  });

  // a prepare reads the whole upload and asks the chain: it takes a token from the organization's bucket too
  router.post('/prepare', auth, validateBody(jobIdSchema), rateLimited, async (ctx) => {
    const quote = await prepareJob(app, ctx.state.principal as Principal, (ctx.state.body as { job_id: string }).job_id, 'register');
    ctx.body = presentRegistrationQuote(quote);
  });

  router.post('/confirm', auth, validateBody(jobIdSchema), async (ctx) => {
    ctx.status = 202;
    ctx.body = await confirmJob(app, ctx.state.principal as Principal, (ctx.state.body as { job_id: string }).job_id, 'register');
  });

  router.post('/:ats_id/versions/init', updater, validateBody(initVersionSchema), rateLimited, idempotent(app), async (ctx) => {
    ctx.body = await initVersion(app, ctx.state.principal as Principal, atsIdParam(ctx.params.ats_id), ctx.state.body as VersionInitInput);
  });

  router.post('/:ats_id/versions/init-upload', updater, validateBody(initVersionUploadSchema), rateLimited, idempotent(app), async (ctx) => {
    ctx.body = await initVersion(app, ctx.state.principal as Principal, atsIdParam(ctx.params.ats_id), ctx.state.body as VersionInitInput);
  });

  router.post('/:ats_id/versions/prepare', updater, validateBody(jobIdSchema), rateLimited, async (ctx) => {
    const quote = await prepareJob(app, ctx.state.principal as Principal, (ctx.state.body as { job_id: string }).job_id, 'add_version', atsIdParam(ctx.params.ats_id));
    ctx.body = presentVersionQuote(quote);
  });

  router.post('/:ats_id/versions/confirm', updater, validateBody(jobIdSchema), async (ctx) => {
    ctx.status = 202;
    ctx.body = await confirmJob(app, ctx.state.principal as Principal, (ctx.state.body as { job_id: string }).job_id, 'add_version', atsIdParam(ctx.params.ats_id));
  });
  return router;
}
