import fc from 'fast-check';
import type { Knex } from 'knex';
import { checkResponse } from '../helpers/contract';
import type { Operation } from '../../web/http/route';
import { OPERATIONS } from '../../web/routes';

/**
 * Hostile requests against every operation of the OpenAPI document, and the invariants they must keep:
 * no 5xx; every 4xx in the envelope with a code documented for that route and status (the contract check
 * the integration suite uses); a rejected request changes nothing in PostgreSQL; the server stays up.
 */
export interface FuzzTarget {
  readonly url: string;
  readonly db: Knex;
  /** Credentials to try, by name: valid ones of every kind and broken ones. */
  readonly credentials: Readonly<Record<string, string | undefined>>;
  /** Real identifiers, so some requests reach past the lookups. */
  readonly ids: { readonly organizationId: string; readonly transactionId: string; readonly atsId: string; readonly apiKeyId: string };
}

export interface FuzzRequest {
  readonly op: Operation;
  readonly path: string;
  readonly query: string;
  readonly credential: string;
  readonly headers: Record<string, string>;
  readonly body:
    { kind: 'json'; value: unknown; unstorable?: boolean } | { kind: 'raw'; bytes: Uint8Array; type: string } | { kind: 'none' };
}

const pct = (s: string) => [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

const hostileString = fc.oneof(
  { weight: 4, arbitrary: fc.string() },
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 300 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 50 }) },
  { weight: 1, arbitrary: fc.nat({ max: 2000 }).map((n) => 'x'.repeat(n * 37)) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      '\u0000',
      '0',
      '-1',
      '1e309',
      'NaN',
      'null',
      '../../etc/passwd',
      '%00',
      '0x' + 'f'.repeat(64),
      'x'.repeat(256),
      'é'.repeat(128),
      '🎵'.repeat(70),
    ),
  },
);

/** JSON values from small to hostile: huge strings, wrong types (deep nesting is sent as raw text below). */
const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 }).map((mb) => ({ title: 'x'.repeat(mb * 400_000) })) },
  { weight: 2, arbitrary: fc.dictionary(hostileString, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 8 }) },
);

/** A valid body of each documented field, trimmed to the fields of the operation at hand. */
function templateBody(op: Operation): Record<string, unknown> {
  const props = Object.keys(
    ((op.body as { properties?: Record<string, unknown> } | undefined)?.properties ?? {}) as Record<string, unknown>,
  );
  const body: Record<string, unknown> = {
    network: 'testnet',
    title: 'Fuzz',
    filename: 'f.wav',
    creators: [{ full_name: 'F', email: 'f@example.test', roles: { author: true }, ipi: '00012345678', isni: '000000012146438X' }],
    job_id: 'x',
    name: 'k',
    scopes: ['works:read'],
    webhook_url: 'https://example.test/hook',
    external_user_ref: 'u1',
  };
  for (const key of Object.keys(body)) if (!props.includes(key)) delete body[key];
  return body;
}

/** A body close to a valid one, with one field broken, missing or extra. */
function mutatedBody(op: Operation): fc.Arbitrary<unknown> {
  const props = Object.keys(
    ((op.body as { properties?: Record<string, unknown> } | undefined)?.properties ?? {}) as Record<string, unknown>,
  );
  if (!props.length) return hostileJson;
  return fc
    .record({
      field: fc.constantFrom(...props, '__proto__', 'constructor', 'extra'),
      value: fc.oneof(hostileString, hostileJson),
      drop: fc.boolean(),
    })
    .map(({ field, value, drop }) => {
      const body = templateBody(op);
      if (drop) delete body[field];
      else body[field] = value;
      return body;
    });
}

/** Text PostgreSQL cannot store (docs/api.md#conventions): NUL and unpaired surrogates, alone or inside other text. */
export const unstorableString = fc
  .tuple(
    fc.string({ maxLength: 8 }),
    fc.constantFrom('\u0000', '\ud800', '\udbff', '\udc00', '\udfff', '\udfff\ud800'),
    fc.string({ maxLength: 8 }),
  )
  .map(([before, bad, after]) => before + bad + after);

/** The string leaves of a JSON value, as paths. */
function stringPaths(value: unknown, path: (string | number)[] = []): (string | number)[][] {
  if (typeof value === 'string') return [path];
  if (Array.isArray(value)) return value.flatMap((v, i) => stringPaths(v, [...path, i]));
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => stringPaths(v, [...path, k]));
  return [];
}

/** A valid body with one of its string fields, however deep (a creator's name, say), made unstorable. */
function unstorableBody(op: Operation): fc.Arbitrary<unknown> | undefined {
  const paths = stringPaths(templateBody(op));
  if (!paths.length) return undefined;
  return fc.record({ path: fc.constantFrom(...paths), value: unstorableString }).map(({ path, value }) => {
    const body = structuredClone(templateBody(op));
    let at: any = body;
    for (const step of path.slice(0, -1)) at = at[step];
    at[path[path.length - 1]!] = value;
    return body;
  });
}

export function fuzzRequest(target: FuzzTarget): fc.Arbitrary<FuzzRequest> {
  const ids = target.ids;
  const param = (name: string) =>
    fc.oneof(
      fc.constant(
        { organization_id: ids.organizationId, transaction_id: ids.transactionId, ats_id: ids.atsId, api_key_id: ids.apiKeyId }[name] ??
          'x',
      ),
      fc.uuid(),
      hostileString.filter((s) => s.length > 0),
    );
  return fc.constantFrom(...OPERATIONS.filter((op) => !op.devOnly)).chain((op) => {
    const unstorable = unstorableBody(op);
    const names = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
    return fc.record({
      op: fc.constant(op),
      path: fc.tuple(...names.map(param)).map((values) => names.reduce((p, name, i) => p.replace(`{${name}}`, pct(values[i]!)), op.path)),
      query: fc.oneof(
        fc.constant(''),
        fc
          .record(
            {
              first: fc.oneof(fc.integer(), hostileString),
              after: hostileString,
              network: hostileString,
              external_user_ref: hostileString,
            },
            { requiredKeys: [] },
          )
          .map(
            (q) =>
              '?' +
              Object.entries(q)
                .map(([k, v]) => `${k}=${pct(String(v))}`)
                .join('&'),
          ),
        // escapes UTF-8 cannot spell: a surrogate's CESU-8 bytes, a stray continuation byte, NUL
        fc
          .record({
            name: fc.constantFrom('external_user_ref', 'after', 'network', 'first'),
            escape: fc.constantFrom('%ED%A0%80', '%ED%BF%BF', '%FF', '%80', '%00', 'a%C3'),
          })
          .map(({ name, escape }) => `?${name}=${escape}`),
      ),
      credential: fc.constantFrom(...Object.keys(target.credentials)),
      headers: fc.oneof(
        { weight: 6, arbitrary: fc.constant({}) },
        {
          weight: 2,
          arbitrary: fc.record({ 'Idempotency-Key': fc.string({ maxLength: 300 }).map((s) => s.replace(/[^\x21-\x7e]/g, 'k') || 'k') }),
        },
        {
          weight: 2,
          arbitrary: fc.record({ 'X-Request-Id': fc.string({ maxLength: 200 }).map((s) => s.replace(/[^\x21-\x7e]/g, 'r') || 'r') }),
        },
        { weight: 1, arbitrary: fc.integer({ min: 8_000, max: 40_000 }).map((n) => ({ 'X-Padding': 'p'.repeat(n) })) },
      ),
      body: fc.oneof(
        fc.constant({ kind: 'none' as const }),
        ...(unstorable ? [unstorable.map((value) => ({ kind: 'json' as const, value, unstorable: true }))] : []),
        mutatedBody(op).map((value) => ({ kind: 'json' as const, value })),
        hostileJson.map((value) => ({ kind: 'json' as const, value })),
        // deeply nested JSON, as text: a parser's recursion is the target
        fc
          .integer({ min: 100, max: 200_000 })
          .map((depth) => ({ kind: 'raw' as const, bytes: Buffer.from('['.repeat(depth) + ']'.repeat(depth)), type: 'application/json' })),
        fc
          .record({
            bytes: fc.uint8Array({ maxLength: 2000 }),
            type: fc.constantFrom(
              'application/json',
              'text/plain',
              'application/x-www-form-urlencoded',
              'application/json; charset=latin1',
            ),
          })
          .map((r) => ({ kind: 'raw' as const, ...r })),
      ),
    });
  });
}

/** Row counts and the ledger's sum: what a rejected request must leave as it found. */
export async function stateOf(db: Knex): Promise<string> {
  const { rows } = await db.raw(`SELECT
    (SELECT count(*) FROM organizations) AS organizations,
    (SELECT count(*) FROM api_keys WHERE revoked_at IS NULL) AS live_keys,
    (SELECT count(*) FROM transactions) AS transactions,
    (SELECT count(*) FROM works) AS works,
    (SELECT count(*) FROM credit_ledger) AS ledger_entries,
    (SELECT coalesce(sum(amount), 0) FROM credit_ledger) AS ledger_sum,
    (SELECT coalesce(sum(credit_balance), 0) FROM organizations) AS balances`);
  return JSON.stringify(rows[0]);
}

/** Responses seen, by status, for the run's report. */
export const fuzzStats = { cases: 0, byStatus: new Map<number, number>() };

/** Sends one request; returns a description of the broken invariant, or undefined. */
export async function violation(target: FuzzTarget, req: FuzzRequest): Promise<string | undefined> {
  const before = await stateOf(target.db);
  const headers: Record<string, string> = { ...req.headers };
  const credential = target.credentials[req.credential];
  if (credential !== undefined) headers.Authorization = credential;
  let body: string | Uint8Array | undefined;
  if (req.body.kind === 'json') {
    body = JSON.stringify(req.body.value) ?? 'null';
    headers['Content-Type'] = 'application/json';
  } else if (req.body.kind === 'raw') {
    body = req.body.bytes;
    headers['Content-Type'] = req.body.type;
  }
  const method = req.op.method.toUpperCase();
  const url = target.url + req.path + req.query;
  let res: Response;
  try {
    res = await fetch(url, { method, headers, body: method === 'GET' ? undefined : (body as BodyInit | undefined) });
  } catch (err) {
    return `request failed at the transport: ${(err as Error).message}`;
  }
  const text = await res.text();
  fuzzStats.cases++;
  fuzzStats.byStatus.set(res.status, (fuzzStats.byStatus.get(res.status) ?? 0) + 1);
  if (res.status >= 500) return `${method} ${req.path} → ${res.status} ${text.slice(0, 300)}`;
  if (req.body.kind === 'json' && req.body.unstorable && res.status < 400)
    return `${method} ${req.path} → ${res.status}: accepted text PostgreSQL cannot store`;
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  try {
    checkResponse(method, url, res.status, res.headers.get('content-type'), parsed, text);
  } catch (err) {
    return (err as Error).message;
  }
  if (res.status >= 400 && (await stateOf(target.db)) !== before) return `${method} ${req.path} → ${res.status} changed state`;
  return undefined;
}

/** Runs `numRuns` cases; throws fast-check's report (shrunk counterexample) on the first violation. */
export async function runFuzz(target: FuzzTarget, options: { numRuns: number; seed?: number }): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fuzzRequest(target), async (req) => {
      const problem = await violation(target, req);
      if (problem) throw new Error(problem);
    }),
    { numRuns: options.numRuns, seed: options.seed, verbose: 1 },
  );
  const alive = await fetch(`${target.url}/healthz`);
  if (alive.status !== 200) throw new Error('the server stopped answering');
}
