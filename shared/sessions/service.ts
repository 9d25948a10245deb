import { hkdfSync } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import type { Knex } from 'knex';
import { AppError } from '../errors';
import { assertKeyActive, unauthorized } from '../api-keys/service';
import type { Principal } from '../api-keys/types';

/**
 * End-user session tokens (docs/api.md#sessions): read-only, bound to one external_user_ref of one organization,
 * issued by an API key and dead as soon as that key is revoked. A `wrs_`-prefixed HS256 JWT under a key
 * derived from SECRETS_KEY, so no storage is needed to verify one.
 */
export const SESSION_PREFIX = 'wrs_';
const ISSUER = 'works-api/session';

export interface SessionDeps {
  readonly db: Knex;
  readonly secretsKey: Buffer;
  readonly ttlSeconds: number;
}

export interface IssuedSession {
  readonly session_token: string;
  readonly external_user_ref: string;
  readonly expires_at: string;
}

export function validateExternalUserRef(ref: unknown): string {
  if (typeof ref !== 'string' || ref.length === 0 || Buffer.byteLength(ref, 'utf8') > 255) {
    throw new AppError('session.invalid_external_user_ref', 'external_user_ref must be a string of 1 to 255 bytes', [
      { path: '/external_user_ref', message: 'must be a string of 1 to 255 bytes' },
    ]);
  }
  return ref;
}

const signingKey = (secretsKey: Buffer) => new Uint8Array(hkdfSync('sha256', secretsKey, Buffer.alloc(0), 'works-api session token', 32));

export async function issueSession(deps: SessionDeps, issuer: Principal, ref: unknown): Promise<IssuedSession> {
  const externalUserRef = validateExternalUserRef(ref);
  const expiresAt = new Date(Date.now() + deps.ttlSeconds * 1000);
  const jwt = await new SignJWT({ org: issuer.organizationId, ref: externalUserRef })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(ISSUER)
    .setSubject(issuer.apiKeyId)
    .setIssuedAt()
    .setExpirationTime(Math.floor(expiresAt.getTime() / 1000))
    .sign(signingKey(deps.secretsKey));
  return { session_token: SESSION_PREFIX + jwt, external_user_ref: externalUserRef, expires_at: expiresAt.toISOString() };
}

export async function authenticateSession(deps: Pick<SessionDeps, 'db' | 'secretsKey'>, token: string): Promise<Principal> {
  if (!token.startsWith(SESSION_PREFIX)) throw unauthorized();
  let claims: { sub?: string; org?: unknown; ref?: unknown };
  try {
    ({ payload: claims } = await jwtVerify(token.slice(SESSION_PREFIX.length), signingKey(deps.secretsKey), {
      issuer: ISSUER,
      algorithms: ['HS256'],
    }));
  } catch {
    throw unauthorized();
  }
  if (typeof claims.sub !== 'string' || typeof claims.org !== 'string' || typeof claims.ref !== 'string') throw unauthorized();
  const key = await assertKeyActive(deps.db, claims.sub);
  if (key.organizationId !== claims.org) throw unauthorized();
  return { kind: 'session', apiKeyId: key.id, organizationId: key.organizationId, externalUserRef: claims.ref, scopes: ['works:read'] };
}
