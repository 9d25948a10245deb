import type { Middleware } from 'koa';
import getRawBody from 'raw-body';
import inflate from 'inflation';
import Bourne from '@hapi/bourne';
import { AppError } from '../../shared/errors';

const PARSED_METHODS = ['POST', 'PUT', 'PATCH'];
/** RFC 8259 whitespace, then an object or an array: a bare value at the top is not a request body. */
const OBJECT_OR_ARRAY = /^[\x20\x09\x0a\x0d]*[[{]/;

/**
 * JSON bodies only, within the configured limit, left in ctx.request.body. Malformed JSON answers 400, a
 * body that is not UTF-8 400 (docs/api.md#conventions: decoded strictly, never into U+FFFD), a `__proto__` key 400, an
 * oversized body 413, and a body of another media type 415, all in the envelope (see the errors middleware).
 * co-body (under @koa/bodyparser) decodes with replacement characters, hence this reader over the same
 * raw-body and inflation it uses.
 */
export function jsonBody(limitBytes: number): Middleware {
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
  return async (ctx, next) => {
    if (!PARSED_METHODS.includes(ctx.method)) return next();
    const hasBody = Number(ctx.get('Content-Length') || 0) > 0 || ctx.get('Transfer-Encoding') !== '';
    if (!hasBody) {
      ctx.request.body = {};
      return next();
    }
    if (!ctx.is('application/json')) throw new AppError('common.unsupported_media_type', 'Request bodies must be application/json');
    const identity = (ctx.get('Content-Encoding') || 'identity') === 'identity';
    const length = identity && ctx.get('Content-Length') ? Number(ctx.get('Content-Length')) : undefined;
    const bytes = await getRawBody(inflate(ctx.req), { limit: limitBytes, length });
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch {
      throw new AppError('common.bad_request', 'The request body is not valid UTF-8');
    }
    if (text.trim() === '') ctx.request.body = {};
    else {
      if (!OBJECT_OR_ARRAY.test(text))
        throw new AppError('common.bad_request', 'The request body is not valid JSON (an object or an array)');
      try {
        ctx.request.body = Bourne.parse(text, { protoAction: 'error' });
      } catch {
        throw new AppError('common.bad_request', 'The request body is not valid JSON');
      }
    }
    await next();
  };
}
