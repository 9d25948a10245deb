import nock from 'nock';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';

/**
 * A third-party OpenID Connect provider stand-in: its JWKS is served through nock (the one piece of HTTP
 * the tests cannot run themselves), and tests mint tokens with its private key.
 */
export const IDP = {
  issuer: 'https://idp.example.test/',
  audience: 'works-api',
  jwksUrl: 'https://idp.example.test/.well-known/jwks.json',
};

let signingKey: CryptoKey;
let publicJwk: JWK;

export async function startIdentityProvider(): Promise<void> {
  const pair = await generateKeyPair('RS256', { extractable: true });
  signingKey = pair.privateKey;
  publicJwk = { ...(await exportJWK(pair.publicKey)), kid: 'test-key', alg: 'RS256', use: 'sig' };
  const url = new URL(IDP.jwksUrl);
  nock(url.origin)
    .persist()
    .get(url.pathname)
    .reply(200, { keys: [publicJwk] });
}

export function stopIdentityProvider(): void {
  nock.cleanAll();
}

export interface AdminTokenOptions {
  readonly organizationId: string;
  readonly roles?: string[];
  readonly issuer?: string;
  readonly audience?: string;
  readonly expiresInSeconds?: number;
  /** Mint it without `exp` (refused: docs/api.md#authentication). */
  readonly withoutExp?: boolean;
  /** How long before now it was issued (5 s by default). */
  readonly issuedSecondsAgo?: number;
  readonly key?: CryptoKey;
}

export async function adminToken(options: AdminTokenOptions): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ org_id: options.organizationId, roles: options.roles ?? ['admin'] })
    .setProtectedHeader({ alg: 'RS256', kid: 'test-key' })
    .setIssuer(options.issuer ?? IDP.issuer)
    .setAudience(options.audience ?? IDP.audience)
    .setSubject('admin@example.test')
    .setIssuedAt(now - (options.issuedSecondsAgo ?? 5));
  if (!options.withoutExp) jwt.setExpirationTime(now + (options.expiresInSeconds ?? 600));
  return jwt.sign(options.key ?? signingKey);
}

/** A token of the service's own staff: the operator role (docs/api.md#operators), not an organization's admin. */
export const operatorToken = (options: Omit<AdminTokenOptions, 'roles'>) => adminToken({ ...options, roles: ['operator'] });
