import type { ErrorCode } from '../../../shared/errors';
import { notFound } from '../../../shared/errors';
import { listWorks, workCreators, workDetail, workVersions } from '../../../shared/works/service';
import { audioDownload, certificateDownload } from '../../../shared/works/downloads';
import { defineRoute, type JsonSchema, type Route } from '../../http/route';
import * as C from '../../openapi/components';
import { creatorsQuerySchema, listWorksQuerySchema, workQuerySchema } from './schemas';
import { presentCreators, presentDownload, presentVersions, presentWorkDetail, presentWorksPage } from './presenters';

/** A path number (ats_id, version); anything else names no resource. */
function pathNumber(value: string, what: string): number {
  if (!/^\d{1,15}$/.test(value)) throw notFound(what);
  return Number(value);
}

/** Every read route also takes an end-user session token, limited to its ref's works (docs/api.md#sessions). */
const read = { method: 'get', tag: 'Works', security: 'apiKeyOrSession', scope: 'works:read' } as const;
/** The detail routes: by ats_id, the chain picked by ?network; a session token sees its own ref's works only. */
const detail = (description: string, schema: JsonSchema) => ({
  ...read,
  responses: { 200: { description, schema } },
  errors: ['common.bad_request', 'common.conflict'] satisfies ErrorCode[],
});
const download = { ...read, responses: { 200: { description: 'A presigned GET URL, valid 10 minutes', schema: C.Download } }, errors: [] };

/** The read side (docs/api.md#reading-works), scope `works:read`. */
export const worksReadRoutes: readonly Route[] = [
  defineRoute({
    ...read,
    path: '/v1/works',
    id: 'listWorks',
    query: listWorksQuerySchema,
    summary:
      'The organization’s works, newest first, by cursor: ?network, ?first (1–100, 20), ?after, ?external_user_ref ' +
      '(a session token’s ref is forced)',
    docs: 'listing-and-cursors',
    responses: { 200: { description: 'A page of works with page_info and total_count', schema: C.WorksPage } },
    errors: ['common.bad_request', 'common.not_found'],
    handler: async (ctx, { caller, query }, { app }) => {
      ctx.body = presentWorksPage(await listWorks(app.db, caller, query));
    },
  }),
  defineRoute({
    ...detail('The work with network, external_user_ref and versions_count', C.WorkDetail),
    path: '/v1/works/{ats_id}',
    id: 'getWork',
    query: workQuerySchema,
    summary: 'A work by ats_id (?network; organization-wide, any external_user_ref ignored)',
    docs: 'work-detail',
    handler: async (ctx, { caller, params, query }, { app }) => {
      const atsId = pathNumber(params.ats_id, 'Work');
      ctx.body = presentWorkDetail(await workDetail(app.db, caller, atsId, query.network));
    },
  }),
  defineRoute({
    ...detail('The versions', C.WorkVersions),
    path: '/v1/works/{ats_id}/versions',
    id: 'listWorkVersions',
    query: workQuerySchema,
    summary: 'Every finalized version of a work, oldest first',
    docs: 'work-detail',
    handler: async (ctx, { caller, params, query }, { app }) => {
      const atsId = pathNumber(params.ats_id, 'Work');
      ctx.body = presentVersions(await workVersions(app.db, caller, atsId, query.network));
    },
  }),
  defineRoute({
    ...detail('The version and its creators', C.WorkCreators),
    path: '/v1/works/{ats_id}/creators',
    id: 'listWorkCreators',
    query: creatorsQuerySchema,
    summary: 'The creators the latest version (or ?version=N) anchored',
    docs: 'work-detail',
    handler: async (ctx, { caller, params, query }, { app }) => {
      const atsId = pathNumber(params.ats_id, 'Work');
      ctx.body = presentCreators(await workCreators(app.db, caller, atsId, query.network, query.version));
    },
  }),
  defineRoute({
    ...download,
    path: '/v1/works/{work_uuid}/download/asset',
    id: 'downloadLatestAudio',
    summary: 'The latest version’s audio',
    docs: 'downloads',
    handler: async (ctx, { caller, params }, { app }) => {
      ctx.body = presentDownload(await audioDownload(app, caller, params.work_uuid));
    },
  }),
  defineRoute({
    ...download,
    path: '/v1/works/{work_uuid}/download/certificate',
    id: 'downloadLatestCertificate',
    summary: 'The latest version’s PDF certificate, rendered first if missing',
    docs: 'downloads',
    handler: async (ctx, { caller, params }, { app }) => {
      ctx.body = presentDownload(await certificateDownload(app, caller, params.work_uuid));
    },
  }),
  defineRoute({
    ...download,
    path: '/v1/works/{work_uuid}/versions/{v}/download/audio',
    id: 'downloadVersionAudio',
    summary: 'A version’s audio: for a metadata-only version, the audio it anchored',
    docs: 'downloads',
    handler: async (ctx, { caller, params }, { app }) => {
      const version = pathNumber(params.v, 'Version');
      ctx.body = presentDownload(await audioDownload(app, caller, params.work_uuid, version));
    },
  }),
  defineRoute({
    ...download,
    path: '/v1/works/{work_uuid}/versions/{v}/download/certificate',
    id: 'downloadVersionCertificate',
    summary: 'A version’s PDF certificate',
    docs: 'downloads',
    handler: async (ctx, { caller, params }, { app }) => {
      const version = pathNumber(params.v, 'Version');
      ctx.body = presentDownload(await certificateDownload(app, caller, params.work_uuid, version));
    },
  }),
];
