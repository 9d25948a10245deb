import { promises as fs } from 'node:fs';
import path from 'node:path';
import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose';

/**
 * The embedded development identity provider: one ES256 key kept in `.data/`, whose public half the web
 * serves as a JWKS in development only, and whose private half the operator CLI uses to mint admin tokens.
 */
export interface DevIdpKey {
  readonly privateJwk: JWK;
  readonly publicJwk: JWK;
}

export async function ensureDevIdpKey(file: string): Promise<DevIdpKey> {
  try {
    return await readDevIdpKey(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  const privateJwk = { ...(await exportJWK(privateKey)), kid: `dev-${Date.now().toString(36)}`, alg: 'ES256', use: 'sig' };
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, JSON.stringify(privateJwk), { mode: 0o600 });
  return readDevIdpKey(file);
}

export async function readDevIdpKey(file: string): Promise<DevIdpKey> {
  const privateJwk = JSON.parse(await fs.readFile(file, 'utf8')) as JWK;
  const { d: _d, ...publicJwk } = privateJwk;
  return { privateJwk, publicJwk };
}

export interface MintOptions {
  readonly issuer: string;
  readonly audience: string;
  readonly organizationId: string;
  readonly subject?: string;
  readonly ttlSeconds?: number;
  readonly roles?: readonly string[];
}

export async function mintDevToken(key: DevIdpKey, options: MintOptions): Promise<{ token: string; expires_at: string }> {
  const ttl = options.ttlSeconds ?? 3600;
  const expiresAt = Math.floor(Date.now() / 1000) + ttl;
  const signer = await importJWK(key.privateJwk, 'ES256');
  const token = await new SignJWT({ org_id: options.organizationId, roles: options.roles ?? ['admin'] })
    .setProtectedHeader({ alg: 'ES256', kid: key.privateJwk.kid, typ: 'JWT' })
    .setIssuer(options.issuer)
    .setAudience(options.audience)
    .setSubject(options.subject ?? 'dev-admin')
    .setIssuedAt()
    .setExpirationTime(expiresAt)
    .sign(signer);
  return { token, expires_at: new Date(expiresAt * 1000).toISOString() };
}
