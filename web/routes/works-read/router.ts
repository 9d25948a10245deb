import Router from '@koa/router';
import type { Context } from 'koa';
import type { Resources } from '../../../shared/resources';
import type { Principal } from '../../../shared/api-keys/types';
import { notFound } from '../../../shared/errors';
import { listWorks, workCreators, workDetail, workVersions } from '../../../shared/works/service';
import { audioDownload, certificateDownload } from '../../../shared/works/downloads';
import { requirePrincipal } from '../../middleware/auth';
import { validateQuery } from '../../middleware/validate';
import { creatorsQuerySchema, listWorksQuerySchema, workQuerySchema, type ListWorksQuery, type WorkQuery } from './schemas';
import { presentCreators, presentDownload, presentVersions, presentWorkDetail, presentWorksPage } from './presenters';

const principal = (ctx: Context) => ctx.state.principal as Principal;
const query = <T>(ctx: Context) => ctx.state.query as T;

/** A path number (ats_id, version); anything else names no resource. */
function pathNumber(value: string | undefined, what: string): number {
  if (!value || !/^\d{1,15}$/.test(value)) throw notFound(what);
  return Number(value);
}

/**
 * The read side (spec 4.8–4.10, contract §6), scope `works:read`. Every route also takes an end-user session
 * token, limited to its ref's works (contract §8).
 */
export function worksReadRouter(app: Resources): Router {
  const router = new Router();
  const deps = { db: app.db, secretsKey: app.config.secrets.key, log: app.log };
  const keyOrSession = requirePrincipal(deps, { scope: 'works:read', allowSession: true });

  router.get('/v1/works', keyOrSession, validateQuery(listWorksQuerySchema), async (ctx) => {
    ctx.body = presentWorksPage(await listWorks(app.db, principal(ctx), query<ListWorksQuery>(ctx)));
  });

  router.get('/v1/works/:ats_id', keyOrSession, validateQuery(workQuerySchema), async (ctx) => {
    const atsId = pathNumber(ctx.params.ats_id, 'Work');
    ctx.body = presentWorkDetail(await workDetail(app.db, principal(ctx), atsId, query<WorkQuery>(ctx).network));
  });

  router.get('/v1/works/:ats_id/versions', keyOrSession, validateQuery(workQuerySchema), async (ctx) => {
    const atsId = pathNumber(ctx.params.ats_id, 'Work');
    ctx.body = presentVersions(await workVersions(app.db, principal(ctx), atsId, query<WorkQuery>(ctx).network));
  });

  router.get('/v1/works/:ats_id/creators', keyOrSession, validateQuery(creatorsQuerySchema), async (ctx) => {
    const atsId = pathNumber(ctx.params.ats_id, 'Work');
    const { network, version } = query<WorkQuery>(ctx);
    ctx.body = presentCreators(await workCreators(app.db, principal(ctx), atsId, network, version));
  });

  router.get('/v1/works/:work_uuid/download/asset', keyOrSession, async (ctx) => {
    ctx.body = presentDownload(await audioDownload(app, principal(ctx), ctx.params.work_uuid as string));
  });

  router.get('/v1/works/:work_uuid/download/certificate', keyOrSession, async (ctx) => {
    ctx.body = presentDownload(await certificateDownload(app, principal(ctx), ctx.params.work_uuid as string));
  });

  router.get('/v1/works/:work_uuid/versions/:v/download/audio', keyOrSession, async (ctx) => {
    const version = pathNumber(ctx.params.v, 'Version');
    ctx.body = presentDownload(await audioDownload(app, principal(ctx), ctx.params.work_uuid as string, version));
  });

  router.get('/v1/works/:work_uuid/versions/:v/download/certificate', keyOrSession, async (ctx) => {
    const version = pathNumber(ctx.params.v, 'Version');
    ctx.body = presentDownload(await certificateDownload(app, principal(ctx), ctx.params.work_uuid as string, version));
  });
  return router;
}
