import type { Context } from 'koa';
import type { Knex } from 'knex';
import { AppError } from '../../shared/errors';
import { checkApiKey, unauthorized, type KeyCheck, type KeyCheckDeps } from '../../shared/api-keys/service';
import type { AdmittedWrite, TakeToken } from '../../shared/api-keys/key-cache';
import { authenticateSession, SESSION_PREFIX } from '../../shared/sessions/service';
import type { Scope } from '../../shared/api-keys/types';
import type { AdminVerifier, AdminIdentity } from '../../shared/identity/admin-verifier';
import type { Logger } from '../../shared/logger';
import type { Resources } from '../../shared/resources';

export function bearerToken(ctx: Context): string | undefined {
  const header = ctx.get('Authorization');
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

export interface PrincipalOptions {
  /** The scope an API key needs. Session tokens carry only `works:read`. */
  readonly scope?: Scope;
  /** Whether an end-user session token is accepted here (read routes and tracking only). */
  readonly allowSession?: boolean;
}

export interface AuthDeps extends KeyCheckDeps {
  readonly db: Knex;
  readonly secretsKey: Buffer;
  readonly log: Logger;
}

/** The web's handles, as authentication uses them (HTTP routes, WebSocket upgrades and socket.io alike). */
export function authDepsOf(app: Resources): AuthDeps {
  return { db: app.db, redis: app.redis, config: app.config, secretsKey: app.config.secrets.key, log: app.log };
}

/**
 * Authenticates an API key (or, where allowed, a session token) and checks its scope. `take`: a token of the
 * organization's bucket is taken in the same round trip when Redis knows the key (see `KeyCheck.token`), and
 * `write` made once the key is admitted (see `KeyCheck.written`).
 */
export async function authenticatePrincipal(
  deps: AuthDeps,
  ctx: Context,
  options: PrincipalOptions = {},
  take?: TakeToken,
  write?: AdmittedWrite,
): Promise<KeyCheck> {
  const token = bearerToken(ctx);
  if (!token) throw unauthorized();
  let checked: KeyCheck;
  if (token.startsWith(SESSION_PREFIX)) {
    if (!options.allowSession) throw new AppError('auth.insufficient_scope', 'A session token cannot be used on this route');
    checked = { principal: await authenticateSession(deps, token) };
  } else {
    checked = await checkApiKey(deps, token, take, write);
  }
  if (options.scope && !checked.principal.scopes.includes(options.scope)) {
    throw new AppError('auth.insufficient_scope', `This route needs the ${options.scope} scope`);
  }
  return checked;
}

/**
 * Administrator routes under /v1/organizations/{organization_id}: an OpenID Connect token with the admin
 * role whose org_id is the organization in the path.
 */
export async function authenticateAdmin(verify: AdminVerifier, ctx: Context, organizationId: string | undefined): Promise<AdminIdentity> {
  const token = bearerToken(ctx);
  if (!token) throw new AppError('auth.unauthorized', 'An administrator token is required');
  const identity: AdminIdentity = await verify(token);
  if (!identity.roles.includes('admin')) throw new AppError('common.forbidden', 'The administrator role is required');
  if (identity.organizationId !== organizationId) {
    throw new AppError('common.forbidden', 'The token does not administer this organization');
  }
  return identity;
}
