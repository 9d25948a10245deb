import type { ErrorCode } from '../../../shared/errors';
import { notFound } from '../../../shared/errors';
import { admitRegistration, initRegistration, initVersion, prepareJob } from '../../../shared/registration/service';
import { confirmJob } from '../../../shared/registration/confirm';
import { defineRoute, type Route } from '../../http/route';
import * as C from '../../openapi/components';
import { initRegistrationSchema, initVersionSchema, initVersionUploadSchema, jobIdSchema } from './schemas';
import { presentRegistrationQuote, presentVersionQuote } from './presenters';

/** The numeric `ats_id` of the path; anything else names no work. */
function atsIdParam(raw: string): number {
  if (!/^\d{1,15}$/.test(raw)) throw notFound('Work');
  return Number(raw);
}

const register = { method: 'post', tag: 'Registration', security: 'apiKey', scope: 'works:register' } as const;
const version = { method: 'post', tag: 'Versions', security: 'apiKey', scope: 'works:update' } as const;
const idempotencyErrors: ErrorCode[] = ['organization.rate_limited', 'idempotency.key_in_use', 'idempotency.key_reused'];
const prepareErrors: ErrorCode[] = [
  'registration.upload_session_not_found',
  'registration.audio_missing',
  'registration.audio_empty',
  'registration.audio_too_large',
  'registration.dry_run_failed',
];

/** Registration and versions: init, prepare, confirm (docs/api.md#registration, docs/api.md#versions). */
export const worksRoutes: readonly Route[] = [
  defineRoute({
    ...register,
    path: '/v1/works/init',
    id: 'initRegistration',
    summary: 'Reserve an upload for a new work and get a presigned PUT URL',
    docs: 'registration-init',
    body: initRegistrationSchema,
    rateLimited: true,
    idempotent: true,
    responses: { 200: { description: 'Upload session reserved', schema: C.UploadJob } },
    errors: ['common.validation_failed', ...idempotencyErrors],
    admit: (body, { app }) => admitRegistration(app, body),
    handler: async (ctx, { caller, body }, { app }) => {
      ctx.body = await initRegistration(app, caller, body);
    },
  }),
  // a prepare reads the whole upload and asks the chain: it takes a token from the organization's bucket too
  defineRoute({
    ...register,
    path: '/v1/works/prepare',
    id: 'prepareRegistration',
    summary:
      'Hash the uploaded audio, dry-run the chain call and quote a binding price; ' +
      'again before confirm replaces the quote, after confirm 404',
    docs: 'registration-prepare',
    body: jobIdSchema,
    rateLimited: true,
    responses: {
      200: {
        description: 'The quote (is_valid false with error credits.insufficient when the organization cannot pay)',
        schema: C.RegistrationQuote,
      },
    },
    errors: ['common.validation_failed', 'organization.rate_limited', ...prepareErrors],
    handler: async (ctx, { caller, body }, { app }) => {
      ctx.body = presentRegistrationQuote(await prepareJob(app, caller, body.job_id, 'register'));
    },
  }),
  defineRoute({
    ...register,
    path: '/v1/works/confirm',
    id: 'confirmRegistration',
    summary: 'Accept the quote: debit it and start the chain transaction; once per job, a second confirm 404',
    docs: 'registration-confirm',
    body: jobIdSchema,
    responses: { 202: { description: 'Transaction handle', schema: C.TransactionHandle } },
    errors: ['common.validation_failed', 'registration.prepared_not_found', 'registration.quote_invalid', 'credits.insufficient'],
    handler: async (ctx, { caller, body }, { app }) => {
      ctx.status = 202;
      ctx.body = await confirmJob(app, caller, body.job_id, 'register');
    },
  }),
  defineRoute({
    ...version,
    path: '/v1/works/{ats_id}/versions/init',
    id: 'initVersion',
    summary: 'Reserve a metadata-only version reusing the anchored audio',
    docs: 'versions-init',
    body: initVersionSchema,
    rateLimited: true,
    idempotent: true,
    responses: { 200: { description: 'Version job reserved', schema: C.VersionJob } },
    errors: ['common.validation_failed', 'common.forbidden', 'common.not_found', ...idempotencyErrors],
    handler: async (ctx, { caller, params, body }, { app }) => {
      ctx.body = await initVersion(app, caller, atsIdParam(params.ats_id), body);
    },
  }),
  defineRoute({
    ...version,
    path: '/v1/works/{ats_id}/versions/init-upload',
    id: 'initVersionUpload',
    summary: 'Reserve a version with new audio and get a presigned PUT URL',
    docs: 'versions-init-upload',
    body: initVersionUploadSchema,
    rateLimited: true,
    idempotent: true,
    responses: { 200: { description: 'Upload session reserved', schema: C.UploadJob } },
    errors: ['common.validation_failed', 'common.forbidden', 'common.not_found', ...idempotencyErrors],
    handler: async (ctx, { caller, params, body }, { app }) => {
      ctx.body = await initVersion(app, caller, atsIdParam(params.ats_id), body);
    },
  }),
  defineRoute({
    ...version,
    path: '/v1/works/{ats_id}/versions/prepare',
    id: 'prepareVersion',
    summary: 'Quote a version',
    docs: 'versions-prepare-and-confirm',
    body: jobIdSchema,
    rateLimited: true,
    responses: { 200: { description: 'The version quote', schema: C.VersionQuote } },
    errors: ['common.validation_failed', 'organization.rate_limited', 'common.not_found', ...prepareErrors],
    handler: async (ctx, { caller, params, body }, { app }) => {
      ctx.body = presentVersionQuote(await prepareJob(app, caller, body.job_id, 'add_version', atsIdParam(params.ats_id)));
    },
  }),
  defineRoute({
    ...version,
    path: '/v1/works/{ats_id}/versions/confirm',
    id: 'confirmVersion',
    summary: 'Accept a version quote',
    docs: 'versions-prepare-and-confirm',
    body: jobIdSchema,
    responses: { 202: { description: 'Transaction handle', schema: C.TransactionHandle } },
    errors: [
      'common.validation_failed',
      'common.not_found',
      'registration.prepared_not_found',
      'registration.quote_invalid',
      'credits.insufficient',
    ],
    handler: async (ctx, { caller, params, body }, { app }) => {
      ctx.status = 202;
      ctx.body = await confirmJob(app, caller, body.job_id, 'add_version', atsIdParam(params.ats_id));
    },
  }),
];
