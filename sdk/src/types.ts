import type { components, operations } from './generated/openapi';

type JsonOf<T> = T extends { content: { 'application/json': infer B } } ? B : never;
/** The JSON request body of an operation (by operationId). */
export type RequestBody<O extends keyof operations> = JsonOf<operations[O]['requestBody']>;
/** The JSON response body of an operation's success status (by operationId). */
export type ResponseBody<
  O extends keyof operations,
  S extends keyof operations[O]['responses'] = 200 & keyof operations[O]['responses'],
> = JsonOf<operations[O]['responses'][S]>;
/** The query parameters of an operation (by operationId). */
export type QueryOf<O extends keyof operations> = NonNullable<operations[O]['parameters']['query']>;

/** `testnet` or `mainnet`. */
export type Network = RequestBody<'initRegistration'>['network'];
/** A new work's metadata (docs/api.md#registration-init): network, title, filename, 1 to 32 creators, optional external_user_ref. */
export type WorkMetadata = RequestBody<'initRegistration'>;
/** One creator: full_name, roles (at least one true), optional ipi, isni, email. */
export type Creator = WorkMetadata['creators'][number];
/** A version's metadata without new audio (docs/api.md#versions-init): network, creators, optional external_user_ref. */
export type VersionMetadata = RequestBody<'initVersion'>;
/** A version's metadata with new audio (docs/api.md#versions-init-upload): as `VersionMetadata`, plus the filename. */
export type VersionUploadMetadata = RequestBody<'initVersionUpload'>;
/** A reserved upload: job_id, the presigned PUT `upload_url` and its expiry. */
export type UploadJob = ResponseBody<'initRegistration'>;
/** A reserved metadata-only version job. */
export type VersionJob = ResponseBody<'initVersion'>;
/** A registration's binding quote; `is_valid` false with `error` when the organization cannot pay. */
export type RegistrationQuote = ResponseBody<'prepareRegistration'>;
/** A version's binding quote. */
export type VersionQuote = ResponseBody<'prepareVersion'>;
/** What confirm answers: the transaction's id, its WebSocket path and its REST path. */
export type TransactionHandle = ResponseBody<'confirmRegistration', 202>;
/** A transaction's status, steps and result (docs/api.md#transactions). */
export type Transaction = ResponseBody<'getTransaction'>;
/** A page of the listing. */
export type WorksPage = ResponseBody<'listWorks'>;
/** A work of the listing. */
export type Work = WorksPage['works'][number];
/** The listing's filters: network, first (page size 1–100), after (a cursor), external_user_ref. */
export type ListWorksQuery = QueryOf<'listWorks'>;
/** A work's detail: the listing's fields plus network, external_user_ref and versions_count. */
export type WorkDetail = ResponseBody<'getWork'>;
/** Every finalized version of a work, oldest first. */
export type WorkVersions = ResponseBody<'listWorkVersions'>;
/** The creators one version anchored. */
export type WorkCreators = ResponseBody<'listWorkCreators'>;
/** A presigned GET URL valid 10 minutes, and its expiry. */
export type Download = ResponseBody<'downloadLatestAudio'>;
/** A key as listed (never its token or secret). */
export type ApiKey = ResponseBody<'listApiKeys'>['api_keys'][number];
/** What creating a key takes: name, scopes, optional webhook_url. */
export type NewApiKey = RequestBody<'createApiKey'>;
/** A created key, with its token and webhook secret, shown this once. */
export type CreatedApiKey = ResponseBody<'createApiKey', 201>;
/** An end-user session: a read-only token bound to one external_user_ref, for an hour. */
export type Session = ResponseBody<'createSession', 201>;
/** The webhook payloads (docs/api.md#events). */
export type WorkRegisteredEvent = components['schemas']['WorkRegistered'];
export type WorkUpdatedEvent = components['schemas']['WorkUpdated'];
export type WorkFailedEvent = components['schemas']['WorkFailed'];
