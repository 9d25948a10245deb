import type { Operation } from '../../openapi/operations';
import { dateTime, hex32, int, nullable, object, str } from '../../openapi/components';
import { creatorsQuerySchema, listWorksQuerySchema, workQuerySchema } from './schemas';

/** The read routes in the OpenAPI document: response shapes (contract §6) and their errors. */
const bool = { type: 'boolean' } as const;
const nullableString = nullable(str);

const workFields = {
  id: { type: 'string', format: 'uuid' },
  ats_id: int,
  owner: str,
  latest_version: { type: 'integer', minimum: 1 },
  latest_commitment: hex32,
  created_at: dateTime,
  latest_version_at: dateTime,
  title: str,
  asset_filename: str,
  has_files: bool,
};

export const Work = object(workFields);
export const WorksPage = object({
  works: { type: 'array', items: Work },
  page_info: object({ has_next_page: bool, has_previous_page: bool, start_cursor: nullableString, end_cursor: nullableString }),
  total_count: int,
});
export const WorkDetail = object({ ...workFields, network: { type: 'string', enum: ['testnet', 'mainnet'] }, external_user_ref: nullableString, versions_count: int });
export const WorkVersions = object({
  versions: { type: 'array', items: object({ version: int, commitment: hex32, title: str, filename: str, tx_hash: hex32, block_number: int, block_hash: hex32, finalized_at: dateTime }) },
});
export const WorkCreators = object({
  version: int,
  creators: {
    type: 'array',
    items: object({ full_name: str, roles: object({ author: bool, composer: bool, arranger: bool, adapter: bool }), ipi: nullableString, isni: nullableString, email: nullableString }),
  },
});
export const Download = object({ url: { type: 'string', format: 'uri' }, expires_at: dateTime });

const read = (op: Omit<Operation, 'method' | 'tag' | 'scope'>): Operation => ({ method: 'get', tag: 'Works', scope: 'works:read', ...op });
const download = (path: string, id: string, summary: string) =>
  read({ path, id, summary, security: 'apiKeyOrSession', responses: { 200: { description: 'A presigned GET URL, valid 10 minutes', schema: Download } }, errors: [] });

/** The detail routes: by ats_id, the chain picked by ?network; a session token sees its own ref's works only. */
const detail = (path: string, id: string, query: Operation['query'], summary: string, description: string, schema: Record<string, unknown>) =>
  read({ path, id, query, summary, security: 'apiKeyOrSession', responses: { 200: { description, schema } }, errors: ['common.bad_request', 'common.conflict'] });

export const worksReadOperations: readonly Operation[] = [
  read({
    path: '/v1/works',
    id: 'listWorks',
    query: listWorksQuerySchema,
    summary: 'The organization’s works, newest first, by cursor: ?network, ?first (1–100, 20), ?after, ?external_user_ref (a session token’s ref is forced) (spec 4.8)',
    security: 'apiKeyOrSession',
    responses: { 200: { description: 'A page of works with page_info and total_count', schema: WorksPage } },
    errors: ['common.bad_request', 'common.not_found'],
  }),
  detail('/v1/works/{ats_id}', 'getWork', workQuerySchema, 'A work by ats_id (?network; organization-wide, any external_user_ref ignored) (spec 4.9)', 'The work with network, external_user_ref and versions_count', WorkDetail),
  detail('/v1/works/{ats_id}/versions', 'listWorkVersions', workQuerySchema, 'Every finalized version of a work, oldest first (spec 4.9)', 'The versions', WorkVersions),
  detail('/v1/works/{ats_id}/creators', 'listWorkCreators', creatorsQuerySchema, 'The creators the latest version (or ?version=N) anchored (spec 4.9)', 'The version and its creators', WorkCreators),
  download('/v1/works/{work_uuid}/download/asset', 'downloadLatestAudio', 'The latest version’s audio (spec 4.10)'),
  download('/v1/works/{work_uuid}/download/certificate', 'downloadLatestCertificate', 'The latest version’s PDF certificate, rendered first if missing (spec 4.10)'),
  download('/v1/works/{work_uuid}/versions/{v}/download/audio', 'downloadVersionAudio', 'A version’s audio: for a metadata-only version, the audio it anchored (spec 4.10)'),
  download('/v1/works/{work_uuid}/versions/{v}/download/certificate', 'downloadVersionCertificate', 'A version’s PDF certificate (spec 4.10)'),
];
