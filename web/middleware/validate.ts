import Ajv, { type ErrorObject, type SchemaObject } from 'ajv';
import addFormats from 'ajv-formats';
import type { Context } from 'koa';
import { AppError, type ErrorCode, type ErrorDetail } from '../../shared/errors';

export const ajv = new Ajv({ allErrors: true, strict: true, coerceTypes: false, useDefaults: true });
addFormats(ajv);

export function toDetails(errors: ErrorObject[] | null | undefined): ErrorDetail[] {
  return (errors ?? []).map((e) => {
    const extra = e.keyword === 'additionalProperties' ? `/${(e.params as { additionalProperty: string }).additionalProperty}` : '';
    const missing = e.keyword === 'required' ? `/${(e.params as { missingProperty: string }).missingProperty}` : '';
    const message = e.keyword === 'additionalProperties' ? 'is not a known field' : (e.message ?? 'is invalid');
    return { path: `${e.instancePath}${extra}${missing}` || '/', message };
  });
}

/** NUL, or half of a UTF-16 surrogate pair (in `u` mode a whole pair is one code point, never Cs). */
const UNSTORABLE = /[\u0000\p{Cs}]/u;

interface At {
  readonly key: string;
  readonly parent?: At;
}

/** The JSON pointer of a place in a body (at module level: a closure per request cost an init ~5 µs under tsx). */
function pointer(at: At | undefined): string {
  const keys: string[] = [];
  for (let a = at; a; a = a.parent) keys.push(a.key.replace(/~/g, '~0').replace(/\//g, '~1'));
  return keys.length ? `/${keys.reverse().join('/')}` : '/';
}

/**
 * Whether any string in the value (keys included) is unstorable: what a valid body meets, walked without building a
 * path or a pair per entry (an init's body: 1.0 µs, against 4.5 for the walk below, in a loop).
 */
function anyUnstorable(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string') {
      if (UNSTORABLE.test(item)) return true;
    } else if (item !== null && typeof item === 'object') {
      for (const key of Object.keys(item)) {
        if (UNSTORABLE.test(key)) return true;
        pending.push((item as Record<string, unknown>)[key]);
      }
    }
  }
  return false;
}

/**
 * Every string in a parsed body or query (keys included) that PostgreSQL's text cannot hold (docs/api.md#conventions).
 * Checked here, before any schema or handler, so no route has to remember it.
 */
export function unstorableText(value: unknown): ErrorDetail[] {
  if (!anyUnstorable(value)) return [];
  const problems: ErrorDetail[] = [];
  // iterative, and paths spelt out only for what is reported: a body may nest as deep as its size allows
  const pending: [unknown, At | undefined][] = [[value, undefined]];
  for (let next = pending.pop(); next && problems.length < 20; next = pending.pop()) {
    const [item, at] = next;
    if (typeof item === 'string') {
      if (UNSTORABLE.test(item)) problems.push({ path: pointer(at), message: 'must not contain NUL or an unpaired UTF-16 surrogate' });
    } else if (item !== null && typeof item === 'object') {
      for (const [key, child] of Object.entries(item)) {
        if (UNSTORABLE.test(key)) problems.push({ path: pointer({ key, parent: at }), message: 'is not a storable field name' });
        else pending.push([child, { key, parent: at }]);
      }
    }
  }
  return problems;
}

/**
 * A body checker for a schema: the parsed value, checked and typed, or a 422 (`code`, default
 * `common.validation_failed`) with details.
 */
export function validateBody<T>(schema: SchemaObject, code: ErrorCode = 'common.validation_failed'): (body: unknown) => T {
  const check = ajv.compile<T>(schema);
  return (body) => {
    const unstorable = unstorableText(body);
    if (unstorable.length) {
      const message = 'Invalid request body: text must not contain NUL or an unpaired UTF-16 surrogate';
      throw new AppError('common.validation_failed', message, unstorable);
    }
    if (!check(body)) {
      const details = toDetails(check.errors);
      throw new AppError(code, `Invalid request body: ${details.map((d) => `${d.path} ${d.message}`).join('; ')}`, details);
    }
    return body;
  };
}

/**
 * Koa's parser turns escapes that are not UTF-8 (`%ED%A0%80`, a surrogate's CESU-8 form; `%FF`) into U+FFFD
 * without a word; such a query is malformed (docs/api.md#conventions), so it is decoded strictly here first.
 */
function isUtf8Query(querystring: string): boolean {
  try {
    for (const part of querystring.split(/[&=]/)) decodeURIComponent(part.replace(/\+/g, ' '));
    return true;
  } catch {
    return false;
  }
}

/** Query strings are text: this instance turns `first=20` into a number before checking it. */
const queryAjv = new Ajv({ allErrors: true, strict: true, coerceTypes: true, useDefaults: true });

/**
 * A query checker for a schema (400 `common.bad_request` with details, docs/api.md#errors: a malformed query): the
 * coerced value, defaults filled in.
 */
export function validateQuery<T>(schema: SchemaObject): (ctx: Context) => T {
  const check = queryAjv.compile<T>(schema);
  return (ctx) => {
    if (!isUtf8Query(ctx.querystring)) throw new AppError('common.bad_request', 'Invalid query: percent-escapes must spell UTF-8');
    const query: unknown = { ...ctx.query };
    const unstorable = unstorableText(query);
    if (unstorable.length) {
      throw new AppError('common.bad_request', 'Invalid query: text must not contain NUL or an unpaired UTF-16 surrogate', unstorable);
    }
    if (!check(query)) {
      const details = toDetails(check.errors);
      throw new AppError('common.bad_request', `Invalid query: ${details.map((d) => `${d.path} ${d.message}`).join('; ')}`, details);
    }
    return query;
  };
}
