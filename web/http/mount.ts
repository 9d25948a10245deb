import type Router from '@koa/router';
import type { Context } from 'koa';
import type { Principal } from '../../shared/api-keys/types';
import { showOrganization } from '../../shared/organizations/service';
import { OrganizationRateLimiter } from '../../shared/rate-limit/service';
import { authDepsOf, authenticateAdmin, authenticatePrincipal } from '../middleware/auth';
import { authenticateOperator } from '../middleware/operator-auth';
import { idempotent } from '../middleware/idempotency';
import { validateBody, validateQuery } from '../middleware/validate';
import { koaPath, type Callers, type Route, type RouteDeps, type Security } from './route';

interface Authenticated {
  readonly caller: Callers[Security];
  /** Set for API key and session callers: what the rate limit and idempotency key on. */
  readonly principal?: Principal;
}

function authenticator(route: Route, deps: RouteDeps): (ctx: Context) => Promise<Authenticated> {
  const { app } = deps;
  const authDeps = authDepsOf(app);
  switch (route.security) {
    case 'apiKey':
    case 'apiKeyOrSession': {
      const options = { scope: route.scope, allowSession: route.security === 'apiKeyOrSession' };
      return async (ctx) => {
        const principal = await authenticatePrincipal(authDeps, ctx, options);
        return { caller: principal, principal };
      };
    }
    case 'admin':
      return async (ctx) => {
        const admin = await authenticateAdmin(deps.verifyAdmin, ctx, ctx.params.organization_id);
        // the organization must exist; the check above already tied it to the caller
        await showOrganization(app.db, admin.organizationId);
        return { caller: admin };
      };
    case 'operator':
      return async (ctx) => ({ caller: await authenticateOperator(deps.verifyAdmin, app.config.operators, ctx) });
    case 'none':
      return async () => ({ caller: undefined });
  }
}

/**
 * Serves each route on the router, in the order given, from its definition alone: authentication by
 * security and scope, the body then the query validated, a rate-limit token, `Idempotency-Key`, the handler.
 */
export function mount(router: Router, routes: readonly Route[], deps: RouteDeps): void {
  const { app } = deps;
  const { perSecond, burst } = app.config.rateLimit;
  const limiter = new OrganizationRateLimiter(app.redis, app.config.redis.prefix, perSecond, burst);
  const idempotency = idempotent(app);
  for (const route of routes) {
    const keyed = route.security === 'apiKey' || route.security === 'apiKeyOrSession';
    if ((route.rateLimited || route.idempotent) && !keyed) {
      throw new Error(`${route.id}: rate limits and idempotency keys need an API key route`);
    }
    const authenticate = authenticator(route, deps);
    const checkBody = route.body ? validateBody<unknown>(route.body, route.invalidBody) : undefined;
    const checkQuery = route.query ? validateQuery<unknown>(route.query) : undefined;
    router.register(koaPath(route.path), [route.method], async (ctx) => {
      const { caller, principal } = await authenticate(ctx);
      const body = checkBody?.(ctx.request.body);
      const query = checkQuery?.(ctx);
      const handle = async () => route.handler(ctx, { caller, params: ctx.params, body, query }, deps);
      if (!principal) return handle();
      if (route.rateLimited) await limiter.take(principal.organizationId);
      return route.idempotent ? idempotency(ctx, principal, handle) : handle();
    });
  }
}
