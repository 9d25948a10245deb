import type { ErrorCode } from '../../shared/errors';
import { createApiKeySchema } from '../routes/api-keys/schemas';
import { createSessionSchema } from '../routes/sessions/schemas';
import { initRegistrationSchema, initVersionSchema, initVersionUploadSchema, jobIdSchema } from '../routes/works/schemas';
import { worksReadOperations } from '../routes/works-read/openapi';
import * as C from './components';

export type Security = 'apiKey' | 'apiKeyOrSession' | 'admin' | 'operator' | 'none';

export interface Operation {
  readonly method: 'get' | 'post' | 'delete';
  /** OpenAPI path template (`{param}`). */
  readonly path: string;
  readonly id: string;
  readonly summary: string;
  readonly tag: string;
  readonly security: Security;
  /** The scope an API key needs. */
  readonly scope?: string;
  /** The very schema the route validates its body with. */
  readonly body?: Record<string, unknown>;
  /** The very schema the route validates its query string with (an object of named parameters). */
  readonly query?: { readonly properties: Readonly<Record<string, unknown>> };
  readonly idempotent?: boolean;
  /** Success responses by status; `schema` absent for an empty body; `contentType` for non-JSON. */
  readonly responses: Readonly<Record<number, { readonly description: string; readonly schema?: Record<string, unknown>; readonly contentType?: string }>>;
  /** Domain error codes of this route, beyond those every route or its security can answer. */
  readonly errors: readonly ErrorCode[];
  /** Served only in development (the embedded identity provider). */
  readonly devOnly?: boolean;
}

const versionWrite = (id: string, summary: string, body: Record<string, unknown>, responses: Operation['responses'], errors: ErrorCode[], suffix: string): Operation => ({
  method: 'post',
  path: `/v1/works/{ats_id}/versions/${suffix}`,
  id,
  summary,
  tag: 'Versions',
  security: 'apiKey',
  scope: 'works:update',
  body,
  responses,
  errors,
});

/** Every route the web serves, described once; the document and the route-coverage test read this table. */
export const OPERATIONS: readonly Operation[] = [
  {
    method: 'post',
    path: '/v1/works/init',
    id: 'initRegistration',
    summary: 'Reserve an upload for a new work and get a presigned PUT URL (spec 4.1)',
    tag: 'Registration',
    security: 'apiKey',
    scope: 'works:register',
    body: initRegistrationSchema,
    idempotent: true,
    responses: { 200: { description: 'Upload session reserved', schema: C.UploadJob } },
    errors: ['common.validation_failed', 'organization.rate_limited', 'idempotency.key_in_use', 'idempotency.key_reused'],
  },
  {
    method: 'post',
    path: '/v1/works/prepare',
    id: 'prepareRegistration',
    summary: 'Hash the uploaded audio, dry-run the chain call and quote a binding price (spec 4.3); again before confirm replaces the quote, after confirm 404',
    tag: 'Registration',
    security: 'apiKey',
    scope: 'works:register',
    body: jobIdSchema,
    responses: { 200: { description: 'The quote (is_valid false with error credits.insufficient when the organization cannot pay)', schema: C.RegistrationQuote } },
    errors: ['common.validation_failed', 'organization.rate_limited', 'registration.upload_session_not_found', 'registration.audio_missing', 'registration.audio_empty', 'registration.audio_too_large', 'registration.dry_run_failed'],
  },
  {
    method: 'post',
    path: '/v1/works/confirm',
    id: 'confirmRegistration',
    summary: 'Accept the quote: debit it and start the chain transaction (spec 4.4); once per job, a second confirm 404',
    tag: 'Registration',
    security: 'apiKey',
    scope: 'works:register',
    body: jobIdSchema,
    responses: { 202: { description: 'Transaction handle', schema: C.TransactionHandle } },
    errors: ['common.validation_failed', 'registration.prepared_not_found', 'registration.quote_invalid'],
  },
  versionWrite('initVersion', 'Reserve a metadata-only version reusing the anchored audio (spec 4.5)', initVersionSchema, { 200: { description: 'Version job reserved', schema: C.VersionJob } }, ['common.validation_failed', 'common.forbidden', 'common.not_found', 'organization.rate_limited', 'idempotency.key_in_use', 'idempotency.key_reused'], 'init'),
  versionWrite('initVersionUpload', 'Reserve a version with new audio and get a presigned PUT URL (spec 4.6)', initVersionUploadSchema, { 200: { description: 'Upload session reserved', schema: C.UploadJob } }, ['common.validation_failed', 'common.forbidden', 'common.not_found', 'organization.rate_limited', 'idempotency.key_in_use', 'idempotency.key_reused'], 'init-upload'),
  versionWrite('prepareVersion', 'Quote a version (spec 4.7)', jobIdSchema, { 200: { description: 'The version quote', schema: C.VersionQuote } }, ['common.validation_failed', 'organization.rate_limited', 'common.not_found', 'registration.upload_session_not_found', 'registration.audio_missing', 'registration.audio_empty', 'registration.audio_too_large', 'registration.dry_run_failed'], 'prepare'),
  versionWrite('confirmVersion', 'Accept a version quote (spec 4.7)', jobIdSchema, { 202: { description: 'Transaction handle', schema: C.TransactionHandle } }, ['common.validation_failed', 'common.not_found', 'registration.prepared_not_found', 'registration.quote_invalid'], 'confirm'),
  ...worksReadOperations,
  {
    method: 'get',
    path: '/v1/transactions/{transaction_id}',
    id: 'getTransaction',
    summary: 'A transaction’s status, steps and result (spec 4.11, contract §6)',
    tag: 'Transactions',
    security: 'apiKeyOrSession',
    responses: { 200: { description: 'The transaction', schema: C.Transaction } },
    errors: ['common.not_found'],
  },
  {
    method: 'get',
    path: '/v1/ws/transactions/{transaction_id}',
    id: 'trackTransaction',
    summary:
      'Live tracking (spec 4.11, contract §6): an RFC 6455 upgrade, authenticated before it is accepted (API key in Authorization, or a session token there or in ?access_token=). Frames { type: connected|update, transaction } carry this route’s REST body; closed with 1000 after completed or failed. socket.io clients use path /v1/socket.io and `subscribe`.',
    tag: 'Transactions',
    security: 'apiKeyOrSession',
    responses: { 101: { description: 'Switching Protocols: the socket is open' } },
    errors: ['common.not_found', 'organization.rate_limited'],
  },
  {
    method: 'post',
    path: '/v1/organizations/{organization_id}/api-keys',
    id: 'createApiKey',
    summary: 'Create an API key; its token and webhook secret are shown this once (spec 4.13)',
    tag: 'API keys',
    security: 'admin',
    body: createApiKeySchema,
    responses: { 201: { description: 'The key, with token and webhook_secret', schema: C.CreatedApiKey } },
    errors: ['common.validation_failed', 'common.not_found'],
  },
  {
    method: 'get',
    path: '/v1/organizations/{organization_id}/api-keys',
    id: 'listApiKeys',
    summary: 'The organization’s API keys, never a token or secret',
    tag: 'API keys',
    security: 'admin',
    responses: { 200: { description: 'Keys', schema: C.ApiKeyList } },
    errors: ['common.not_found'],
  },
  {
    method: 'delete',
    path: '/v1/organizations/{organization_id}/api-keys/{api_key_id}',
    id: 'revokeApiKey',
    summary: 'Revoke a key, at once everywhere (204 also when already revoked)',
    tag: 'API keys',
    security: 'admin',
    responses: { 204: { description: 'Revoked' } },
    errors: ['common.not_found'],
  },
  {
    method: 'post',
    path: '/v1/sessions',
    id: 'createSession',
    summary: 'A one-hour read-only session token bound to an end-user ref, issued by a key with works:read (contract §8)',
    tag: 'Sessions',
    security: 'apiKey',
    scope: 'works:read',
    body: createSessionSchema,
    responses: { 201: { description: 'The session', schema: C.Session } },
    errors: ['session.invalid_external_user_ref', 'common.validation_failed'],
  },
  {
    method: 'get',
    path: '/healthz',
    id: 'health',
    summary: 'Liveness: the process answers',
    tag: 'Operations',
    security: 'none',
    responses: { 200: { description: 'Alive', schema: C.Health } },
    errors: [],
  },
  {
    method: 'get',
    path: '/readyz',
    id: 'readiness',
    summary: 'Readiness: PostgreSQL, Redis, S3 and each chain checked; 503 names what is down',
    tag: 'Operations',
    security: 'none',
    responses: { 200: { description: 'Ready', schema: C.Readiness }, 503: { description: 'Not ready', schema: C.Readiness } },
    errors: [],
  },
  {
    method: 'get',
    path: '/metrics',
    id: 'metrics',
    summary: 'Prometheus metrics (operators: the operator credential, or a token with the operator role)',
    tag: 'Operations',
    security: 'operator',
    responses: { 200: { description: 'Prometheus text format', contentType: 'text/plain' } },
    errors: [],
  },
  {
    method: 'get',
    path: '/v1/openapi.json',
    id: 'openapi',
    summary: 'This document',
    tag: 'Operations',
    security: 'none',
    responses: { 200: { description: 'OpenAPI 3.1', schema: { type: 'object' } } },
    errors: [],
  },
  {
    method: 'get',
    path: '/docs',
    id: 'reference',
    summary: 'This document as a reference page',
    tag: 'Operations',
    security: 'none',
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    errors: [],
  },
  {
    method: 'get',
    path: '/docs/{asset}',
    id: 'referenceAsset',
    summary: 'The reference page’s script and style (Swagger UI, served from the package)',
    tag: 'Operations',
    security: 'none',
    responses: { 200: { description: 'Asset', contentType: 'application/octet-stream' } },
    errors: [],
  },
  {
    method: 'get',
    path: '/admin/queues',
    id: 'queuesBoard',
    summary: 'Bull Board: every queue, retry of failed and dead-lettered jobs (its JSON API lives below this path)',
    tag: 'Operations',
    security: 'operator',
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    errors: [],
  },
  {
    method: 'get',
    path: '/dev/idp/jwks.json',
    id: 'devIdpJwks',
    summary: 'Development only: the embedded identity provider’s key set',
    tag: 'Operations',
    security: 'none',
    responses: { 200: { description: 'JWKS', schema: C.Jwks } },
    errors: [],
    devOnly: true,
  },
];

/** What every route can answer, whatever it does. */
export const COMMON_ERRORS: readonly ErrorCode[] = ['common.bad_request', 'common.not_found', 'common.method_not_allowed', 'common.headers_too_large', 'common.service_unavailable', 'common.internal'];
/** What a route with a JSON body can answer about the body itself. */
export const BODY_ERRORS: readonly ErrorCode[] = ['common.payload_too_large', 'common.unsupported_media_type', 'common.validation_failed'];
/** What each kind of security can answer. */
export const SECURITY_ERRORS: Readonly<Record<Security, readonly ErrorCode[]>> = {
  apiKey: ['auth.unauthorized', 'auth.insufficient_scope', 'organization.inactive'],
  apiKeyOrSession: ['auth.unauthorized', 'auth.insufficient_scope', 'organization.inactive'],
  admin: ['auth.unauthorized', 'common.forbidden'],
  operator: ['auth.unauthorized', 'common.forbidden'],
  none: [],
};

/** Every error code an operation may answer. */
export function errorCodesOf(op: Operation): ErrorCode[] {
  return [...new Set([...COMMON_ERRORS, ...(op.body ? BODY_ERRORS : []), ...SECURITY_ERRORS[op.security], ...op.errors])];
}
