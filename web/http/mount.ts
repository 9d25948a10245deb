import type Router from '@koa/router';
import type { Context } from 'koa';
import type { Principal } from '../../shared/api-keys/types';
import { showOrganization } from '../../shared/organizations/service';
import { OrganizationRateLimiter, rateLimited } from '../../shared/rate-limit/service';
import type { Admission, AdmittedWrite, TakeToken, TokenOutcome } from '../../shared/api-keys/key-cache';
import { authDepsOf, authenticateAdmin, authenticatePrincipal } from '../middleware/auth';
import { authenticateOperator } from '../middleware/operator-auth';
import { idempotent } from '../middleware/idempotency';
import { validateBody, validateQuery } from '../middleware/validate';
import { koaPath, type Callers, type Route, type RouteDeps, type Security } from './route';

interface Authenticated {
  readonly caller: Callers[Security];
  /** Set for API key and session callers: what the rate limit and idempotency key on. */
  readonly principal?: Principal;
  /** The bucket's answer when a token was taken with the key check. */
  readonly token?: TokenOutcome;
  /** Whether the key check made the admitted write. */
  readonly written?: boolean;
}

type Authenticator = (ctx: Context, take?: TakeToken, write?: AdmittedWrite) => Promise<Authenticated>;

function authenticator(route: Route, deps: RouteDeps): Authenticator {
  const { app } = deps;
  const authDeps = authDepsOf(app);
  switch (route.security) {
    case 'apiKey':
    case 'apiKeyOrSession': {
      const options = { scope: route.scope, allowSession: route.security === 'apiKeyOrSession' };
      return async (ctx, take, write) => {
        const { principal, token, written } = await authenticatePrincipal(authDeps, ctx, options, take, write);
        return { caller: principal, principal, ...(token ? { token } : {}), written: written === true };
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
    if ((route.rateLimited || route.idempotent || route.admit) && !keyed) {
      throw new Error(`${route.id}: rate limits, idempotency keys and admitted writes need an API key route`);
    }
    const { scope } = route;
    if (route.admit && !scope) throw new Error(`${route.id}: an admitted write needs the route's scope`);
    const authenticate = authenticator(route, deps);
    const checkBody = route.body ? validateBody<unknown>(route.body, route.invalidBody) : undefined;
    const checkQuery = route.query ? validateQuery<unknown>(route.query) : undefined;
    // a rate-limited route takes its token with the key check, if the body and query are valid (an invalid
    // request takes none, as before); their errors still answer after the key's (a 401 before a 422)
    const take = route.rateLimited && route.scope ? { perSecond, burst, scope: route.scope } : undefined;
    router.register(koaPath(route.path), [route.method], async (ctx) => {
      let input: { body: unknown; query: unknown } | undefined;
      let admission: Admission<unknown> | undefined;
      let invalid: unknown;
      try {
        const checked = { body: checkBody?.(ctx.request.body), query: checkQuery?.(ctx) };
        admission = route.admit && !ctx.get('Idempotency-Key') ? route.admit(checked.body, deps) : undefined;
        input = checked;
      } catch (err) {
        invalid = err;
      }
      const write = admission && scope ? { scope, commands: admission.commands } : undefined;
      const { caller, principal, token, written } = await authenticate(ctx, input ? take : undefined, write);
      if (!input) throw invalid;
      const { body, query } = input;
      const handle = async () => route.handler(ctx, { caller, params: ctx.params, body, query }, deps);
      if (!principal) return handle();
      if (route.rateLimited) {
        if (!token) await limiter.take(principal.organizationId);
        else if (!token.taken) throw rateLimited(token.waitMs);
      }
      if (admission) {
        ctx.body = await admission.answer(principal, written === true);
        return;
      }
      return route.idempotent ? idempotency(ctx, principal, handle) : handle();
    });
  }
}
