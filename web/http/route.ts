import type { Context } from 'koa';
import type { Resources } from '../../shared/resources';
import type { ErrorCode } from '../../shared/errors';
import type { Principal, Scope } from '../../shared/api-keys/types';
import type { Admission } from '../../shared/api-keys/key-cache';
import type { AdminIdentity, AdminVerifier } from '../../shared/identity/admin-verifier';
import type { WebMetrics } from '../middleware/metrics';
import type { Lifecycle } from '../drain';
import type { ReadinessWatch } from '../readiness';

/** Who may call a route, and what the route learns about the caller once authenticated. */
export interface Callers {
  readonly apiKey: Principal;
  readonly apiKeyOrSession: Principal;
  /** An administrator of the organization in the path, which exists. */
  readonly admin: AdminIdentity;
  /** The operator's subject, or the credential's username. */
  readonly operator: string;
  readonly none: undefined;
}
export type Security = keyof Callers;

export type JsonSchema = Readonly<Record<string, unknown>>;

declare const admits: unique symbol;
/** A JSON schema together with the type of what it admits: declared once, beside the schema. */
export type Typed<T, S extends JsonSchema = JsonSchema> = S & { readonly [admits]?: T };
export const typed =
  <T>() =>
  <const S extends JsonSchema>(schema: S): Typed<T, S> =>
    schema;

type ParamNames<P extends string> = P extends `${string}{${infer Name}}${infer Rest}` ? Name | ParamNames<Rest> : never;
/** The path parameters an OpenAPI template names (`/v1/works/{ats_id}` → `{ ats_id: string }`). */
export type Params<P extends string> = { readonly [K in ParamNames<P>]: string };

export interface SuccessResponse {
  readonly description: string;
  readonly schema?: JsonSchema;
  readonly contentType?: string;
}

/** What the OpenAPI document and the contract tests read of a route. */
export interface Operation {
  readonly method: 'get' | 'post' | 'delete';
  /** OpenAPI path template (`{param}`). */
  readonly path: string;
  readonly id: string;
  readonly summary: string;
  /**
   * The heading of docs/api.md that states this operation's contract, as its anchor (`registration-init`):
   * the document's description names it (`docs/api.md#registration-init`), and a test checks it exists.
   */
  readonly docs?: string;
  readonly tag: string;
  readonly security: Security;
  /** The scope an API key needs. */
  readonly scope?: Scope;
  /** The very schema the route validates its body with. */
  readonly body?: JsonSchema;
  /** The very schema the route validates its query string with (an object of named parameters). */
  readonly query?: JsonSchema & { readonly properties: JsonSchema };
  /** Honours `Idempotency-Key` (runs after the rate limit). */
  readonly idempotent?: boolean;
  /** Success responses by status; `schema` absent for an empty body; `contentType` for non-JSON. */
  readonly responses: Readonly<Record<number, SuccessResponse>>;
  /** Domain error codes of this route, beyond those every route or its security can answer. */
  readonly errors: readonly ErrorCode[];
  /** Served only in development (the embedded identity provider). */
  readonly devOnly?: boolean;
}

/** What every handler may use beyond its request: built once per web app. */
export interface RouteDeps {
  readonly app: Resources;
  readonly verifyAdmin: AdminVerifier;
  readonly metrics: WebMetrics;
  /** The OpenAPI document, serialized once (built from these very routes, hence passed in). */
  readonly openApiJson: string;
  /** Whether the process is stopping (/readyz says so). */
  readonly lifecycle: Lifecycle;
  /** `/readyz`'s checks, logged and counted as they change (web/readiness.ts). */
  readonly readiness: ReadinessWatch;
}

/** A handler's validated input, typed by its route's definition. */
export interface RouteInput<S extends Security, P extends string, B, Q> {
  readonly caller: Callers[S];
  readonly params: Params<P>;
  readonly body: B;
  readonly query: Q;
}

/**
 * One route, declared once: the Koa router (web/http/mount.ts) and the OpenAPI document
 * (web/openapi/document.ts) are both derived from it. The chain is always: authenticate by `security` and
 * `scope`, validate the body then the query, take a rate-limit token, honour `Idempotency-Key`, then `handler`.
 */
export interface Route<S extends Security = Security, P extends string = string, B = unknown, Q = unknown> extends Operation {
  readonly path: P;
  readonly security: S;
  readonly body?: Typed<B>;
  readonly query?: Typed<Q, JsonSchema & { readonly properties: JsonSchema }>;
  /** The error code of an invalid body (default `common.validation_failed`). */
  readonly invalidBody?: ErrorCode;
  /** Takes a token from the organization's bucket (API key routes only). */
  readonly rateLimited?: boolean;
  /**
   * The request's own write, offered to the key check so that it is made in the check's round trip (API key
   * routes with a scope; not for a request with `Idempotency-Key`, which `handler` answers): the response body
   * is then the admission's answer. Throws what `handler` would for an invalid body (answered after the key's).
   */
  admit?(body: B, deps: RouteDeps): Admission<unknown>;
  // a method, not a property: a list of routes of different inputs is then a list of `Route`
  handler(ctx: Context, input: RouteInput<S, P, B, Q>, deps: RouteDeps): Promise<void> | void;
}

/** Infers a route's types from its definition (security, path, body and query schemas). */
export const defineRoute = <S extends Security, P extends string, B = undefined, Q = undefined>(
  route: Route<S, P, B, Q>,
  // not inferred from where the route goes (a `Route[]` would widen its path to string)
): NoInfer<Route<S, P, B, Q>> => route;

/** A documented operation something other than the Koa router serves (a WebSocket upgrade, Bull Board). */
export interface ServedElsewhere extends Operation {
  /** What serves it, for the reader. */
  readonly servedBy: string;
}

export const isRoute = (op: Route | ServedElsewhere): op is Route => 'handler' in op;

/** `/v1/works/{ats_id}` → `/v1/works/:ats_id`. */
export const koaPath = (path: string): string => path.replace(/\{([^}]+)\}/g, ':$1');
