import type { Context } from 'koa';
import type { Resources } from '../../shared/resources';
import { AppError } from '../../shared/errors';
import { IdempotencyStore } from '../../shared/idempotency/service';
import type { Principal } from '../../shared/api-keys/types';

const KEY_SHAPE = /^[A-Za-z0-9._:-]{1,255}$/;

/**
 * Honours `Idempotency-Key` (docs/api.md#idempotency): the handler's first answer is replayed byte for byte.
 * Runs after authentication (keys are scoped to the API key) and validation; `handle` answers a first request.
 */
export function idempotent(app: Resources): (ctx: Context, principal: Principal, handle: () => Promise<void>) => Promise<void> {
  const store = new IdempotencyStore(app.redis, app.config.redis.prefix, app.config.ttl.idempotencySeconds);
  return async (ctx, principal, handle) => {
    const key = ctx.get('Idempotency-Key');
    if (!key) return handle();
    if (!KEY_SHAPE.test(key)) {
      throw new AppError('common.validation_failed', 'Idempotency-Key must be 1 to 255 letters, digits or ._:-', [
        { path: 'header:Idempotency-Key', message: 'invalid' },
      ]);
    }
    const fingerprint = IdempotencyStore.fingerprint(ctx.method, ctx.path, ctx.request.body);
    const response = await store.run(principal.apiKeyId, key, fingerprint, async () => {
      await handle();
      return { status: ctx.status, body: JSON.stringify(ctx.body) };
    });
    ctx.status = response.status;
    ctx.type = 'application/json';
    ctx.body = response.body;
  };
}
