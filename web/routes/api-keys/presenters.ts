import type { ApiKey } from '../../../shared/api-keys/types';
import type { CreatedApiKey } from '../../../shared/api-keys/service';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function presentApiKey(key: ApiKey) {
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    scopes: key.scopes,
    webhook_url: key.webhookUrl,
    created_at: key.createdAt.toISOString(),
    last_used_at: iso(key.lastUsedAt),
    revoked_at: iso(key.revokedAt),
  };
}

/** The only response that ever carries the token and the webhook secret. */
export function presentCreatedApiKey(created: CreatedApiKey) {
  const { id, name, prefix, scopes, webhook_url, created_at } = presentApiKey(created.key);
  return { id, name, prefix, scopes, webhook_url, created_at, token: created.token, webhook_secret: created.webhookSecret };
}
