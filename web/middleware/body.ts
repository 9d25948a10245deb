import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';
import { AppError } from '../../shared/errors';

/**
 * JSON bodies only, within the configured limit. Malformed JSON answers 400, an oversized body 413,
 * and a body of another media type 415, all in the envelope (see the errors middleware).
 */
export function jsonBody(limitBytes: number): Middleware {
  const parse = bodyParser({ enableTypes: ['json'], jsonLimit: limitBytes, jsonStrict: true, encoding: 'utf-8' });
  return async (ctx, next) => {
    const hasBody = Number(ctx.get('Content-Length') || 0) > 0 || ctx.get('Transfer-Encoding') !== '';
    if (['POST', 'PUT', 'PATCH'].includes(ctx.method) && hasBody && !ctx.is('application/json')) {
      throw new AppError('common.unsupported_media_type', 'Request bodies must be application/json');
    }
    await parse(ctx, next);
  };
}
