import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { ApiKey, Scope } from './types';

const COLUMNS = ['id', 'organization_id', 'name', 'prefix', 'scopes', 'webhook_url', 'created_at', 'last_used_at', 'revoked_at'];

export const toApiKey = (r: Record<string, unknown>): ApiKey => ({
  id: r.id as string,
  organizationId: r.organization_id as string,
  name: r.name as string,
  prefix: r.prefix as string,
  scopes: r.scopes as Scope[],
  webhookUrl: (r.webhook_url as string | null) ?? null,
  createdAt: r.created_at as Date,
  lastUsedAt: (r.last_used_at as Date | null) ?? null,
  revokedAt: (r.revoked_at as Date | null) ?? null,
});

export interface NewApiKeyRow {
  readonly organizationId: string;
  readonly name: string;
  readonly prefix: string;
  readonly tokenHash: Buffer;
  readonly scopes: readonly Scope[];
  readonly webhookUrl: string | null;
  readonly webhookSecretEncrypted: (id: string) => string;
}

/** Inserts a key; the secret's ciphertext is bound to the generated id, hence the two steps in one transaction. */
export async function insertApiKey(db: Knex, row: NewApiKeyRow): Promise<ApiKey> {
  return db.transaction(async (trx) => {
    const id = randomUUID();
    const [inserted] = await trx('api_keys')
      .insert({
        id,
        organization_id: row.organizationId,
        name: row.name,
        prefix: row.prefix,
        token_hash: row.tokenHash,
        scopes: row.scopes,
        webhook_url: row.webhookUrl,
        webhook_secret_encrypted: row.webhookSecretEncrypted(id),
      })
      .returning(COLUMNS);
    return toApiKey(inserted);
  });
}

export async function listApiKeys(db: Knex, organizationId: string): Promise<ApiKey[]> {
  const rows = await db('api_keys')
    .where({ organization_id: organizationId })
    .orderBy([{ column: 'created_at', order: 'desc' }, 'id'])
    .select(COLUMNS);
  return rows.map(toApiKey);
}

/** Revokes once (an already revoked key keeps its first revocation time); the key's token hash, if it exists. */
export async function revokeApiKey(db: Knex, organizationId: string, id: string): Promise<Buffer | undefined> {
  const row = await db('api_keys').where({ organization_id: organizationId, id }).first('id', 'token_hash');
  if (!row) return undefined;
  await db('api_keys').where({ id }).whereNull('revoked_at').update({ revoked_at: db.fn.now() });
  return row.token_hash as Buffer;
}

export interface KeyLookup {
  readonly key: ApiKey;
  readonly organizationStatus: string;
  /** True when last_used_at is missing or older than a minute: the caller may record the use. */
  readonly stale: boolean;
}

export async function findKeyByHash(db: Knex, tokenHash: Buffer): Promise<KeyLookup | undefined> {
  const row = await db('api_keys as k')
    .join('organization_statuses as o', 'o.id', 'k.organization_id')
    .where('k.token_hash', tokenHash)
    .first(
      ...COLUMNS.map((c) => `k.${c}`),
      'o.status as organization_status',
      db.raw(`(k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute') AS stale`),
    );
  return row ? { key: toApiKey(row), organizationStatus: row.organization_status, stale: row.stale } : undefined;
}

export async function findActiveKey(db: Knex, id: string): Promise<(KeyLookup & { key: ApiKey }) | undefined> {
  const row = await db('api_keys as k')
    .join('organization_statuses as o', 'o.id', 'k.organization_id')
    .where('k.id', id)
    .first(...COLUMNS.map((c) => `k.${c}`), 'o.status as organization_status');
  return row ? { key: toApiKey(row), organizationStatus: row.organization_status, stale: false } : undefined;
}

/** Conditional, so concurrent requests and several web processes write at most once a minute per key. */
export async function touchLastUsed(db: Knex, id: string): Promise<void> {
  await db('api_keys')
    .where({ id })
    .where((q) => q.whereNull('last_used_at').orWhereRaw(`last_used_at < now() - interval '1 minute'`))
    .update({ last_used_at: db.fn.now() });
}
