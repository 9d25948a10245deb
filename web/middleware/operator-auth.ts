import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, Middleware } from 'koa';
import type { Config } from '../../shared/config';
import { AppError } from '../../shared/errors';
import type { AdminVerifier } from '../../shared/identity/admin-verifier';
import { bearerToken } from './auth';

const REALM = 'Basic realm="works-api operators", charset="UTF-8"';

/**
 * Operator tools (Bull Board, /metrics): HTTP Basic with OPERATOR_CREDENTIAL when that is configured, or a
 * bearer identity token with the `operator` role (of an organization in OPERATOR_ORG_IDS when that is set).
 * An organization's admin is not an operator: a token without the role answers 403. Never open: anything
 * else is 401 in the error envelope.
 */
export function requireOperator(verify: AdminVerifier, operators: Config['operators']): Middleware {
  return async (ctx, next) => {
    ctx.state.operator = await authenticateOperator(verify, operators, ctx);
    await next();
  };
}

/** The operator's subject (a token) or username (the credential); see requireOperator. */
export async function authenticateOperator(verify: AdminVerifier, operators: Config['operators'], ctx: Context): Promise<string> {
  const bearer = bearerToken(ctx);
  if (bearer) {
    const identity = await verify(bearer);
    if (!identity.roles.includes('operator'))
      throw new AppError('common.forbidden', 'The operator role is required (an organization admin is not an operator)');
    if (operators.orgIds.length > 0 && !operators.orgIds.includes(identity.organizationId)) {
      throw new AppError('common.forbidden', 'The token does not belong to an operator organization');
    }
    return identity.subject;
  }
  const basic = /^Basic[ ]+([A-Za-z0-9+/=]+)\s*$/i.exec(ctx.get('Authorization'))?.[1];
  if (operators.credential && basic) {
    const decoded = Buffer.from(basic, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    const username = decoded.slice(0, Math.max(colon, 0));
    const password = decoded.slice(colon + 1);
    // Both compared in full, in constant time, whatever their lengths.
    const userOk = sameSecret(username, operators.credential.username);
    const passwordOk = sameSecret(password, operators.credential.password);
    if (colon > 0 && userOk && passwordOk) return username;
  }
  throw new AppError(
    'auth.unauthorized',
    operators.credential ? 'An operator token or the operator credential is required' : 'An operator token is required',
    undefined,
    operators.credential ? { 'WWW-Authenticate': REALM } : undefined,
  );
}

function sameSecret(given: string, expected: string): boolean {
  const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}
