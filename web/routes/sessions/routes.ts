import { issueSession } from '../../../shared/sessions/service';
import { defineRoute, type Route } from '../../http/route';
import * as C from '../../openapi/components';
import { createSessionSchema } from './schemas';

/** End-user sessions (docs/api.md#sessions): a key with `works:read` issues one (a session only reads). */
export const createSessionRoute: Route = defineRoute({
  method: 'post',
  path: '/v1/sessions',
  id: 'createSession',
  summary: 'A one-hour read-only session token bound to an end-user ref, issued by a key with works:read',
  docs: 'sessions',
  tag: 'Sessions',
  security: 'apiKey',
  scope: 'works:read',
  body: createSessionSchema,
  invalidBody: 'session.invalid_external_user_ref',
  responses: { 201: { description: 'The session', schema: C.Session } },
  errors: ['session.invalid_external_user_ref', 'common.validation_failed'],
  handler: async (ctx, { caller, body }, { app }) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 201;
    ctx.body = await issueSession(
      { db: app.db, secretsKey: app.config.secrets.key, ttlSeconds: app.config.sessions.ttlSeconds },
      caller,
      body.external_user_ref,
    );
  },
});
