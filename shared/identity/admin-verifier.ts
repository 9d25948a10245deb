import { createRemoteJWKSet, jwtVerify, errors as joseErrors, type JWTVerifyGetKey } from 'jose';
import type { Config } from '../config';
import { AppError } from '../errors';

export interface AdminIdentity {
  readonly subject: string;
  readonly organizationId: string;
  readonly roles: readonly string[];
}

export type AdminVerifier = (bearer: string) => Promise<AdminIdentity>;

/**
 * Verifies an OpenID Connect access token against the provider's JWKS (cached by jose, refetched on an
 * unknown `kid`): signature, issuer, audience and expiry, which must be present and at most
 * ADMIN_TOKEN_MAX_AGE after `iat`; then the `org_id` and `roles` claims. Which role a route needs is the
 * route's check (`admin` for an organization's routes, `operator` for the operator tools).
 */
export function createIdentityVerifier(identity: Config['identity'], getKey?: JWTVerifyGetKey): AdminVerifier {
  const jwks =
    getKey ?? createRemoteJWKSet(new URL(identity.jwksUrl), { cacheMaxAge: 10 * 60_000, cooldownDuration: 30_000, timeoutDuration: 5000 });
  return async (bearer) => {
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(bearer, jwks, {
        issuer: identity.issuer,
        audience: identity.audience,
        algorithms: ['RS256', 'RS384', 'RS512', 'PS256', 'ES256', 'ES384', 'EdDSA'],
        clockTolerance: 30,
        requiredClaims: ['exp', 'iat'],
        maxTokenAge: identity.maxTokenAgeSeconds,
      }));
      if ((payload.exp as number) - (payload.iat as number) > identity.maxTokenAgeSeconds) {
        throw new joseErrors.JWTClaimValidationFailed('token lifetime exceeds ADMIN_TOKEN_MAX_AGE', payload, 'exp', 'check_failed');
      }
    } catch (err) {
      if (err instanceof joseErrors.JOSEError && !(err instanceof joseErrors.JWKSTimeout)) {
        throw new AppError('auth.unauthorized', 'A valid administrator token is required');
      }
      throw new AppError('common.service_unavailable', 'The identity provider could not be reached');
    }
    const roles = Array.isArray(payload.roles) ? payload.roles.filter((r): r is string => typeof r === 'string') : [];
    if (typeof payload.org_id !== 'string' || typeof payload.sub !== 'string') {
      throw new AppError('auth.unauthorized', 'The administrator token lacks the org_id or sub claim');
    }
    return { subject: payload.sub, organizationId: payload.org_id, roles };
  };
}
