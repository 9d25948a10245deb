import Router from '@koa/router';
import type { Resources } from '../../../shared/resources';
import { createApiKey, listApiKeys, revokeApiKey } from '../../../shared/api-keys/service';
import { showOrganization } from '../../../shared/organizations/service';
import type { AdminVerifier } from '../../../shared/identity/admin-verifier';
import { requireAdmin } from '../../middleware/auth';
import { validateBody } from '../../middleware/validate';
import { createApiKeySchema, type CreateApiKeyBody } from './schemas';
import { presentApiKey, presentCreatedApiKey } from './presenters';

/** Key management (spec 4.13): administrators of the organization only. */
export function apiKeysRouter(app: Resources, verifyAdmin: AdminVerifier): Router {
  const router = new Router({ prefix: '/v1/organizations/:organization_id/api-keys' });
  router.use(requireAdmin(verifyAdmin));
  // The organization must exist; the admin check above already tied it to the caller.
  router.use(async (ctx, next) => {
    await showOrganization(app.db, ctx.params.organization_id as string);
    await next();
  });

  router.post('/', validateBody(createApiKeySchema), async (ctx) => {
    const body = ctx.state.body as CreateApiKeyBody;
    const created = await createApiKey(
      { db: app.db, box: app.box, allowHttpWebhooks: app.config.webhooks.allowHttp, allowPrivateWebhooks: app.config.webhooks.allowPrivate },
      ctx.params.organization_id as string,
      { name: body.name, scopes: body.scopes, webhookUrl: body.webhook_url },
    );
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 201;
    ctx.body = presentCreatedApiKey(created);
  });

  router.get('/', async (ctx) => {
    const keys = await listApiKeys(app.db, ctx.params.organization_id as string);
    ctx.body = { api_keys: keys.map(presentApiKey) };
  });

  router.delete('/:api_key_id', async (ctx) => {
    await revokeApiKey(app.db, ctx.params.organization_id as string, ctx.params.api_key_id as string);
    ctx.status = 204;
  });
  return router;
}
