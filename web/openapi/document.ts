import { ERROR_STATUS, type ErrorCode } from '../../shared/errors';
import * as C from './components';
import type { Operation, Security } from '../http/route';
import { OPERATIONS } from '../routes';
import { errorCodesOf } from './error-codes';

const SECURITY: Record<Security, Record<string, string[]>[]> = {
  apiKey: [{ apiKey: [] }],
  apiKeyOrSession: [{ apiKey: [] }, { sessionToken: [] }],
  admin: [{ adminJwt: [] }],
  operator: [{ operatorJwt: [] }, { operatorBasic: [] }],
  none: [],
};

const requestIdHeader = { description: 'The request’s id, also in every error envelope and log line', schema: { type: 'string' } };

function errorResponses(op: Operation) {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(op)) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code]);
  return Object.fromEntries(
    [...byStatus.entries()]
      .sort(([a], [b]) => a - b)
      .map(([status, codes]) => [
        String(status),
        {
          description: `Error envelope, code one of: ${codes.map((c) => `\`${c}\``).join(', ')}`,
          headers: {
            'X-Request-Id': requestIdHeader,
            ...(status === 429 || status === 503
              ? { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } } }
              : {}),
          },
          content: { 'application/json': { schema: C.errorEnvelope(codes) } },
        },
      ]),
  );
}

/**
 * Where the contract of a route or event is stated, for a reader of /docs: a relative link would lead nowhere
 * from there, so the file and anchor are named as code (which also keeps Swagger UI from linkifying `api.md`
 * as a web address); on GitHub, and in a checkout, `docs/api.md#<anchor>` is that very section.
 */
export const contractRef = (anchor: string) => `Contract: \`docs/api.md#${anchor}\`.`;

const description = (op: Operation) =>
  [op.scope && `API key scope: \`${op.scope}\`.`, op.docs && contractRef(op.docs)].filter(Boolean).join(' ');

function operationObject(op: Operation) {
  const pathParams = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => ({
    name: m[1]!,
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }));
  const parameters = [
    ...pathParams,
    ...Object.entries(op.query?.properties ?? {}).map(([name, schema]) => ({ name, in: 'query', required: false, schema })),
    ...(op.idempotent
      ? [
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: false,
            description: 'Same key and body within 24 h: the first response again; another body: 422; in flight: 409',
            schema: { type: 'string', maxLength: 255 },
          },
        ]
      : []),
  ];
  const responses = Object.fromEntries(
    Object.entries(op.responses).map(([status, r]) => [
      status,
      {
        description: r.description,
        headers: { 'X-Request-Id': requestIdHeader },
        ...(r.schema
          ? { content: { 'application/json': { schema: r.schema } } }
          : r.contentType
            ? { content: { [r.contentType]: { schema: { type: 'string' } } } }
            : {}),
      },
    ]),
  );
  return {
    operationId: op.id,
    summary: op.summary,
    tags: [op.tag],
    security: SECURITY[op.security],
    ...(description(op) ? { description: description(op) } : {}),
    ...(parameters.length ? { parameters } : {}),
    ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: op.body } } } } : {}),
    responses: { ...responses, ...errorResponses(op) },
  };
}

const webhookHeaders = [
  {
    name: 'X-Service-Signature',
    in: 'header',
    required: true,
    description:
      '`t=<unix>,v1=<hex>`: v1 = hex HMAC-SHA256, keyed with the base64-decoded webhook secret, over `<t>.<raw body>`. Refuse a t more than 300 s from your clock.',
    schema: { type: 'string', pattern: '^t=\\d+,v1=[0-9a-f]{64}$' },
  },
  { name: 'X-Service-Timestamp', in: 'header', required: true, schema: { type: 'string', pattern: '^\\d+$' } },
  {
    name: 'X-Service-Event',
    in: 'header',
    required: true,
    schema: { type: 'string', enum: ['work_registered', 'work_updated', 'work_failed'] },
  },
  {
    name: 'X-Service-Delivery',
    in: 'header',
    required: true,
    description: 'The delivery’s id: the same on every attempt',
    schema: { type: 'string', format: 'uuid' },
  },
];

function webhook(summary: string, schema: Record<string, unknown>) {
  return {
    post: {
      summary,
      description: `${contractRef('events')} Signature and retries: \`docs/api.md#headers-and-signature\`, \`docs/api.md#delivery-and-retries\`.`,
      parameters: webhookHeaders,
      requestBody: { required: true, content: { 'application/json': { schema } } },
      responses: {
        '2XX': { description: 'Acknowledged' },
        default: {
          description:
            '408, 429 and 5xx (and timeouts, network errors) are retried on the schedule, honouring Retry-After up to the next step; any other status is final: the delivery is dead-lettered.',
        },
      },
    },
  };
}

/** The OpenAPI 3.1 document of every operation; `devOnly` ones only when they are served. */
export function buildOpenApiDocument(options: { includeDev?: boolean } = {}) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) {
    if (op.devOnly && !options.includeDev) continue;
    (paths[op.path] ??= {})[op.method] = operationObject(op);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'works-api',
      version: '1.0.0',
      description:
        'Register musical works on a Substrate chain and add versions, server to server. Errors are always the envelope `{ error: { code, message, request_id, details? } }`; another organization’s resource is 404, never 403. ' +
        'The contract in prose, section by section, is `docs/api.md` in the repository: each operation names its section.',
    },
    servers: [{ url: '/' }],
    tags: ['Registration', 'Versions', 'Works', 'Transactions', 'API keys', 'Sessions', 'Operations'].map((name) => ({ name })),
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'wrk_live_…', description: 'An organization API key' },
        sessionToken: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'wrs_…',
          description: 'An end-user session token (read-only, bound to one external_user_ref)',
        },
        adminJwt: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            'An identity provider token with the admin role for the organization (exp required, at most ADMIN_TOKEN_MAX_AGE after iat)',
        },
        operatorJwt: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            'An identity provider token with the operator role (the service’s staff, never an organization admin; of an organization in OPERATOR_ORG_IDS when set)',
        },
        operatorBasic: { type: 'http', scheme: 'basic', description: 'OPERATOR_CREDENTIAL, when configured' },
      },
      schemas: {
        ErrorEnvelope: C.ErrorEnvelope,
        WorkRegistered: C.WorkRegistered,
        WorkUpdated: C.WorkUpdated,
        WorkFailed: C.WorkFailed,
      },
    },
    paths,
    webhooks: {
      work_registered: webhook('A registration finalized', C.WorkRegistered),
      work_updated: webhook('A version finalized', C.WorkUpdated),
      work_failed: webhook('A registration or version failed; the whole debit was refunded first', C.WorkFailed),
    },
  };
}
