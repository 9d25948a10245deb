import Ajv, { type ErrorObject, type JSONSchemaType, type SchemaObject } from 'ajv';
import addFormats from 'ajv-formats';
import type { Middleware } from 'koa';
import { AppError, type ErrorCode, type ErrorDetail } from '../../shared/errors';

export const ajv = new Ajv({ allErrors: true, strict: true, coerceTypes: false, useDefaults: true });
addFormats(ajv);

export function toDetails(errors: ErrorObject[] | null | undefined): ErrorDetail[] {
  return (errors ?? []).map((e) => {
    const extra = e.keyword === 'additionalProperties' ? `/${(e.params as { additionalProperty: string }).additionalProperty}` : '';
    const missing = e.keyword === 'required' ? `/${(e.params as { missingProperty: string }).missingProperty}` : '';
    const message = e.keyword === 'additionalProperties' ? 'is not a known field' : e.message ?? 'is invalid';
    return { path: `${e.instancePath}${extra}${missing}` || '/', message };
  });
}

export interface ValidateOptions {
  /** The error code for a failure (default `common.validation_failed`). */
  readonly code?: ErrorCode;
}

/** Validates the JSON body against a schema; the parsed value is left in ctx.state.body. */
export function validateBody<T>(schema: JSONSchemaType<T> | SchemaObject, options: ValidateOptions = {}): Middleware {
  const check = ajv.compile<T>(schema);
  return async (ctx, next) => {
    const body = ctx.request.body;
    if (!check(body)) {
      const details = toDetails(check.errors);
      throw new AppError(options.code ?? 'common.validation_failed', `Invalid request body: ${details.map((d) => `${d.path} ${d.message}`).join('; ')}`, details);
    }
    ctx.state.body = body;
    await next();
  };
}

/** Query strings are text: this instance turns `first=20` into a number before checking it. */
const queryAjv = new Ajv({ allErrors: true, strict: true, coerceTypes: true, useDefaults: true });

/**
 * Validates the query string against a schema (400 `common.bad_request` with details, contract §1: a
 * malformed query); the coerced value, defaults filled in, is left in ctx.state.query.
 */
export function validateQuery<T>(schema: SchemaObject): Middleware {
  const check = queryAjv.compile<T>(schema);
  return async (ctx, next) => {
    const query = { ...ctx.query };
    if (!check(query)) {
      const details = toDetails(check.errors);
      throw new AppError('common.bad_request', `Invalid query: ${details.map((d) => `${d.path} ${d.message}`).join('; ')}`, details);
    }
    ctx.state.query = query;
    await next();
  };
}
