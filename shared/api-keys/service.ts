import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from '../logger';
import { AppError, notFound } from '../errors';
import type { SecretBox } from '../crypto/secret-box';
import * as repo from './repo';
import { generateToken, hashToken, isWellFormedToken, tokenPrefix } from './token';
import {
  fillKey,
  lookupPacked,
  packWrite,
  recordRevoked,
  type AdmittedWrite,
  type CacheLookup,
  type CachedKey,
  type KeyCacheDeps,
  type TakeToken,
  type TokenOutcome,
} from './key-cache';
import type { ApiKey, Principal, Scope } from './types';
import { keyReadsOf, type KeyReads } from './key-reads';
import { RefusedDestination, vetDestination, type DestinationPolicy } from '../webhooks/destination';

export interface ApiKeyDeps {
  readonly db: Knex;
  readonly box: SecretBox;
  readonly allowHttpWebhooks: boolean;
  /** WEBHOOK_ALLOW_PRIVATE: a URL reaching a private address is accepted (development and tests). */
  readonly allowPrivateWebhooks: boolean;
}

export interface CreateApiKeyInput {
  readonly name: string;
  readonly scopes: readonly Scope[];
  readonly webhookUrl?: string | null;
}

export interface CreatedApiKey {
  readonly key: ApiKey;
  /** Returned once, never stored. */
  readonly token: string;
  /** Base64 of 32 random bytes; stored only encrypted. */
  readonly webhookSecret: string;
}

export const webhookSecretAad = (apiKeyId: string) => `webhook-secret:${apiKeyId}`;

export async function createApiKey(deps: ApiKeyDeps, organizationId: string, input: CreateApiKeyInput): Promise<CreatedApiKey> {
  const webhookUrl = input.webhookUrl ?? null;
  if (webhookUrl !== null)
    await assertWebhookUrl(webhookUrl, { allowHttp: deps.allowHttpWebhooks, allowPrivate: deps.allowPrivateWebhooks });
  const token = generateToken();
  const secret = randomBytes(32);
  const key = await repo.insertApiKey(deps.db, {
    organizationId,
    name: input.name.trim(),
    prefix: tokenPrefix(token),
    tokenHash: hashToken(token),
    scopes: [...new Set(input.scopes)],
    webhookUrl,
    webhookSecretEncrypted: (id) => deps.box.seal(secret, webhookSecretAad(id)),
  });
  return { key, token, webhookSecret: secret.toString('base64') };
}

export const listApiKeys = (db: Knex, organizationId: string) => repo.listApiKeys(db, organizationId);

/** What checking and revoking keys use: PostgreSQL, the truth, and the records in Redis (key-cache.ts). */
export interface KeyCheckDeps extends KeyCacheDeps {
  readonly db: Knex;
  readonly log?: Logger;
  /** The process's PostgreSQL reads of keys under way (one per Knex instance unless given). */
  readonly keyReads?: KeyReads;
}

/** Revokes in PostgreSQL, then marks the key's record revoked before answering: the very next request fails. */
export async function revokeApiKey(deps: KeyCheckDeps, organizationId: string, apiKeyId: string): Promise<void> {
  const tokenHash = /^[0-9a-f-]{36}$/i.test(apiKeyId) ? await repo.revokeApiKey(deps.db, organizationId, apiKeyId) : undefined;
  if (!tokenHash) throw notFound('API key');
  await recordRevoked(deps, tokenHash);
}

/** A checked key, and, when a token of its organization's bucket was asked for, whether one was taken. */
export interface KeyCheck {
  readonly principal: Principal;
  /** Absent when the bucket was not consulted (no token asked for, or PostgreSQL answered): take it apart. */
  readonly token?: TokenOutcome;
  /** Whether the admitted write asked for was made with the check (else it is the caller's to make). */
  readonly written?: boolean;
}

/**
 * Resolves a bearer API key to its principal. The checksum is verified before any lookup. The key's record
 * in Redis answers (key-cache.ts), taking a token of the organization's bucket and making the admitted write
 * in the same round trip when asked; PostgreSQL answers when Redis has no record or is away, and the answer
 * is kept (the write is then not made: `written` false). A check that finds a read of its key under way in
 * this process waits for it and asks Redis again, rather than read the same row (key-reads.ts).
 */
export async function checkApiKey(deps: KeyCheckDeps, token: string, take?: TakeToken, write?: AdmittedWrite): Promise<KeyCheck> {
  if (!isWellFormedToken(token)) throw unauthorized();
  const hash = hashToken(token);
  const packed = write && { scope: write.scope, packed: packWrite(write.commands) };
  let cached = await lookupPacked(deps, hash, take, packed).catch(unavailable);
  if (cached.kind === 'unknown' || cached.kind === 'unavailable') {
    const reads = deps.keyReads ?? keyReadsOf(deps.db);
    // no await between finding no read under way and starting one: checks answered together read once. With
    // Redis away, nothing joins: asking it again would only add its timeout.
    const joining = cached.kind === 'unknown' ? reads.join(hash) : undefined;
    if (!joining) return checkInPostgres(deps, reads, hash);
    await joining;
    cached = await lookupPacked(deps, hash, take, packed).catch(unavailable);
    if (cached.kind === 'unknown' || cached.kind === 'unavailable') return checkInPostgres(deps, reads, hash);
  }
  if (cached.kind === 'revoked') throw unauthorized();
  if (cached.firstUseThisMinute) touch(deps, cached.key.id);
  const principal = principalOf(cached.key, cached.organizationStatus);
  return { principal, ...(cached.token ? { token: cached.token } : {}), written: cached.written };
}

/** The key as PostgreSQL has it, its records filled in Redis for the next checks (the token and the write not made). */
async function checkInPostgres(deps: KeyCheckDeps, reads: KeyReads, hash: Buffer): Promise<KeyCheck> {
  const found = await reads.read(hash, async (found) => {
    if (found) await fillKey(deps, hash, found.key.revokedAt ? 'revoked' : keyOf(found), found.organizationStatus).catch(() => undefined);
  });
  if (!found || found.key.revokedAt) throw unauthorized();
  if (found.stale) touch(deps, found.key.id);
  return { principal: principalOf(keyOf(found), found.organizationStatus) };
}

/** Redis did not answer the key check (away, or its command timed out). */
const unavailable = (): CacheLookup | { readonly kind: 'unavailable' } => ({ kind: 'unavailable' });

const keyOf = ({ key }: repo.KeyLookup): CachedKey => ({ id: key.id, organizationId: key.organizationId, scopes: key.scopes });

export async function authenticateApiKey(deps: KeyCheckDeps, token: string): Promise<Principal> {
  return (await checkApiKey(deps, token)).principal;
}

function principalOf(key: CachedKey, organizationStatus: string): Principal {
  if (organizationStatus !== 'active') throw new AppError('organization.inactive', 'The organization is not active');
  return { kind: 'api_key', apiKeyId: key.id, organizationId: key.organizationId, scopes: key.scopes };
}

/** Records the key's use (at most once a minute per key), off the request's path. */
function touch(deps: KeyCheckDeps, apiKeyId: string): void {
  repo.touchLastUsed(deps.db, apiKeyId).catch((err) => deps.log?.warn({ err, api_key_id: apiKeyId }, 'could not record key use'));
}

/** The key behind a session token must still be active, and its organization too. */
export async function assertKeyActive(db: Knex, apiKeyId: string): Promise<ApiKey> {
  const found = await repo.findActiveKey(db, apiKeyId);
  if (!found || found.key.revokedAt) throw unauthorized();
  if (found.organizationStatus !== 'active') throw new AppError('organization.inactive', 'The organization is not active');
  return found.key;
}

export function unauthorized(): AppError {
  return new AppError('auth.unauthorized', 'A valid API key is required (Authorization: Bearer wrk_live_...)');
}

/**
 * A webhook URL as key creation takes it: absolute, no credentials, and what the delivery policy would
 * refuse (scheme, an address of the host that is private, loopback, link-local…) refused now with 422
 * rather than at the first delivery; still checked again at every attempt. A host that does not resolve yet
 * is accepted: its DNS may be set up after the key.
 */
export async function assertWebhookUrl(value: string, policy: DestinationPolicy): Promise<void> {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalidWebhook('must be an absolute URL');
  }
  if (url.protocol !== 'https:' && !(policy.allowHttp && url.protocol === 'http:')) {
    throw invalidWebhook(policy.allowHttp ? 'must use http or https' : 'must use https');
  }
  if (url.username || url.password) throw invalidWebhook('must not embed credentials');
  try {
    await vetDestination(value, policy);
  } catch (err) {
    if (err instanceof RefusedDestination) throw invalidWebhook(err.message.replace(/^refused: /, 'is refused: '));
  }
}

const invalidWebhook = (message: string) =>
  new AppError('common.validation_failed', `webhook_url ${message}`, [{ path: '/webhook_url', message }]);
