import { notFound } from '../../../shared/errors';
import { readDevIdpKey } from '../../../shared/dev/identity-provider';
import { defineRoute, type Route } from '../../http/route';
import * as C from '../../openapi/components';

/** The embedded identity provider's JWKS; served only when DEV_IDP_KEY_FILE is set (never in production). */
export const devIdpJwksRoute: Route = defineRoute({
  method: 'get',
  path: '/dev/idp/jwks.json',
  id: 'devIdpJwks',
  summary: 'Development only: the embedded identity provider’s key set',
  tag: 'Operations',
  security: 'none',
  responses: { 200: { description: 'JWKS', schema: C.Jwks } },
  errors: [],
  devOnly: true,
  handler: async (ctx, _input, { app }) => {
    const keyFile = app.config.identity.devKeyFile;
    if (!keyFile) throw notFound('Route'); // not mounted then (web/app.ts): never reached
    const { publicJwk } = await readDevIdpKey(keyFile);
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.body = { keys: [publicJwk] };
  },
});
