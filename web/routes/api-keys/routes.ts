import { createApiKey, listApiKeys, revokeApiKey } from '../../../shared/api-keys/service';
import { defineRoute, type Route } from '../../http/route';
import * as C from '../../openapi/components';
import { createApiKeySchema } from './schemas';
import { presentApiKey, presentCreatedApiKey } from './presenters';

// Key management (docs/api.md#api-key-management): administrators of the organization only; `admin` security also checks it exists.
const keys = {
  path: '/v1/organizations/{organization_id}/api-keys',
  tag: 'API keys',
  security: 'admin',
  docs: 'api-key-management',
} as const;

export const apiKeysRoutes: readonly Route[] = [
  defineRoute({
    ...keys,
    method: 'post',
    id: 'createApiKey',
    summary: 'Create an API key; its token and webhook secret are shown this once',
    body: createApiKeySchema,
    responses: { 201: { description: 'The key, with token and webhook_secret', schema: C.CreatedApiKey } },
    errors: ['common.validation_failed', 'common.not_found'],
    handler: async (ctx, { params, body }, { app }) => {
      const { allowHttp, allowPrivate } = app.config.webhooks;
      const created = await createApiKey(
        { db: app.db, box: app.box, allowHttpWebhooks: allowHttp, allowPrivateWebhooks: allowPrivate },
        params.organization_id,
        { name: body.name, scopes: body.scopes, webhookUrl: body.webhook_url },
      );
      ctx.set('Cache-Control', 'no-store');
      ctx.status = 201;
      ctx.body = presentCreatedApiKey(created);
    },
  }),
  defineRoute({
    ...keys,
    method: 'get',
    id: 'listApiKeys',
    summary: 'The organization’s API keys, never a token or secret',
    responses: { 200: { description: 'Keys', schema: C.ApiKeyList } },
    errors: ['common.not_found'],
    handler: async (ctx, { params }, { app }) => {
      const keys = await listApiKeys(app.db, params.organization_id);
      ctx.body = { api_keys: keys.map(presentApiKey) };
    },
  }),
  defineRoute({
    ...keys,
    method: 'delete',
    path: `${keys.path}/{api_key_id}`,
    id: 'revokeApiKey',
    summary: 'Revoke a key, at once everywhere (204 also when already revoked)',
    responses: { 204: { description: 'Revoked' } },
    errors: ['common.not_found'],
    handler: async (ctx, { params }, { app }) => {
      await revokeApiKey(app, params.organization_id, params.api_key_id);
      ctx.status = 204;
    },
  }),
];
