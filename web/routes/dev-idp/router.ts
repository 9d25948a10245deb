import Router from '@koa/router';
import { readDevIdpKey } from '../../../shared/dev/identity-provider';

/** The embedded identity provider's JWKS; mounted only when DEV_IDP_KEY_FILE is set (never in production). */
export function devIdpRouter(keyFile: string): Router {
  const router = new Router();
  router.get('/dev/idp/jwks.json', async (ctx) => {
    const { publicJwk } = await readDevIdpKey(keyFile);
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.body = { keys: [publicJwk] };
  });
  return router;
}
