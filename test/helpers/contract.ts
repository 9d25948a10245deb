import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { ERROR_STATUS } from '../../shared/errors';
import { errorEnvelope } from '../../web/openapi/components';
import type { Operation } from '../../web/http/route';
import { errorCodesOf } from '../../web/openapi/error-codes';
import { OPERATIONS } from '../../web/routes';

/**
 * Checks every response the integration tests receive against the OpenAPI document's description of that
 * route and status (issue: the document cannot drift from the behaviour). A mismatch throws in the test
 * that made the request.
 */
const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);

const routes = OPERATIONS.map((op) => ({
  op,
  pattern: new RegExp(`^${op.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
}));
const cache = new Map<string, ValidateFunction>();
const compiled = (key: string, schema: () => object) => {
  let v = cache.get(key);
  if (!v) cache.set(key, (v = ajv.compile(schema())));
  return v;
};
const anyError = compiled('error:any', () => errorEnvelope(Object.keys(ERROR_STATUS)));

/** Responses received, and what the check made of them; the root afterAll hook (suite-checks.ts) reads it. */
export const contractStats = { requests: 0, validated: 0, skipped: 0, mismatched: 0 };

/** Paths served by something other than our routes: Bull Board's own JSON API. */
const FOREIGN = [/^\/admin\/queues\/.+/];

export function checkResponse(method: string, url: string, status: number, contentType: string | null, body: unknown, text: string): void {
  contractStats.requests++;
  const path = new URL(url, 'http://x').pathname.replace(/(.)\/$/, '$1');
  if (FOREIGN.some((p) => p.test(path))) {
    contractStats.skipped++;
    return;
  }
  const route = routes.find((r) => r.op.method === method.toLowerCase() && r.pattern.test(path));
  const problem = route ? against(route.op, status, contentType, body) : unrouted(status, body);
  if (problem) {
    contractStats.mismatched++;
    throw new Error(`response does not match the OpenAPI document: ${method} ${path} → ${status}: ${problem}\n${text.slice(0, 500)}`);
  }
  contractStats.validated++;
}

function against(op: Operation, status: number, contentType: string | null, body: unknown): string | undefined {
  const success = op.responses[status];
  if (success) {
    if (!success.schema)
      return success.contentType && !contentType?.startsWith(success.contentType) && success.contentType !== 'application/octet-stream'
        ? `content type ${contentType}`
        : undefined;
    const validate = compiled(`${op.id}:${status}`, () => success.schema!);
    return validate(body) ? undefined : ajv.errorsText(validate.errors);
  }
  const codes = errorCodesOf(op).filter((c) => ERROR_STATUS[c] === status);
  if (!codes.length) return `status ${status} is not documented for ${op.id}`;
  const validate = compiled(`${op.id}:error:${status}`, () => errorEnvelope(codes));
  return validate(body) ? undefined : `undocumented error: ${ajv.errorsText(validate.errors)}`;
}

function unrouted(status: number, body: unknown): string | undefined {
  // unknown routes, and what the HTTP parser refuses before routing (web/client-errors.ts)
  if (![400, 404, 405, 431].includes(status)) return `no documented route, yet ${status}`;
  return anyError(body) ? undefined : ajv.errorsText(anyError.errors);
}
