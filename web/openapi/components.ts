import { ERROR_STATUS } from '../../shared/errors';
import { SCOPES } from '../../shared/api-keys/types';
import { STEPS } from '../../shared/transactions/steps';

/**
 * Response shapes of the API (docs/api.md), as JSON Schema. Request bodies are not here: the
 * document takes them from the schemas the routes validate with (web/routes/<route>/schemas.ts).
 */
export const str = { type: 'string' } as const;
export const int = { type: 'integer' } as const;
export const dateTime = { type: 'string', format: 'date-time' } as const;
export const hex32 = { type: 'string', pattern: '^0x[0-9a-f]{64}$' } as const;
export const uuid = { type: 'string', format: 'uuid' } as const;
export const network = { type: 'string', enum: ['testnet', 'mainnet'] } as const;
export const nullable = <T extends Record<string, unknown>>(schema: T) => ({ ...schema, type: [schema.type as string, 'null'] });

export const object = (properties: Record<string, unknown>, optional: string[] = []) => ({
  type: 'object',
  additionalProperties: false,
  required: Object.keys(properties).filter((k) => !optional.includes(k)),
  properties,
});

/** The error envelope (docs/api.md#error-envelope), with `code` limited to the given codes. */
export const errorEnvelope = (codes: readonly string[]) =>
  object({
    error: object(
      {
        code: { type: 'string', enum: [...codes] },
        message: str,
        request_id: str,
        details: { type: 'array', items: object({ path: str, message: str }) },
      },
      ['details'],
    ),
  });

export const ErrorEnvelope = errorEnvelope(Object.keys(ERROR_STATUS));

const quoteError = object({ code: str, message: str });
const priceLines = {
  service_fee_credits: int,
  storage_fee_credits: int,
  total_price_credits: int,
  is_valid: { type: 'boolean' },
  error: quoteError,
  expires_at: dateTime,
};

export const RegistrationQuote = object(
  { job_id: uuid, work_id: uuid, commitment: hex32, network_fee_credits: int, total_deposit_credits: int, ...priceLines },
  ['error'],
);

export const VersionQuote = object(
  { job_id: uuid, commitment: hex32, version_deposit_credits: int, network_fee_credits: int, ...priceLines },
  ['error'],
);

export const UploadJob = object({ job_id: uuid, upload_url: { type: 'string', format: 'uri' }, upload_expires_at: dateTime });
export const VersionJob = object({ job_id: uuid });

export const TransactionHandle = object({ transaction_id: uuid, ws_url: str, status_url: str });

const stepName = { type: 'string', enum: [...STEPS, 'failed'] } as const;
export const Transaction = object({
  transaction_id: uuid,
  transaction_type: { type: 'string', enum: ['register', 'add_version'] },
  network,
  status: { type: 'string', enum: ['pending', 'submitted', 'in_block', 'finalized', 'failed'] },
  current_step: stepName,
  progress: { type: 'integer', minimum: 0, maximum: 100 },
  is_complete: { type: 'boolean' },
  steps: {
    type: 'array',
    items: object({ name: stepName, status: { type: 'string', enum: ['completed', 'in_progress', 'failed'] }, at: dateTime }),
  },
  result: {
    oneOf: [
      { type: 'null' },
      object({
        ats_id: int,
        version: int,
        work_id: uuid,
        tx_hash: hex32,
        block_number: int,
        block_hash: hex32,
        explorer_url: str,
        finalized_at: dateTime,
      }),
      object({ error: object({ code: str, message: str }) }),
    ],
  },
  created_at: dateTime,
  updated_at: dateTime,
});

/** The read routes (docs/api.md#reading-works). */
const bool = { type: 'boolean' } as const;
const nullableString = nullable(str);

const workFields = {
  id: { type: 'string', format: 'uuid' },
  ats_id: int,
  owner: str,
  latest_version: { type: 'integer', minimum: 1 },
  latest_commitment: hex32,
  created_at: dateTime,
  latest_version_at: dateTime,
  title: str,
  asset_filename: str,
  has_files: bool,
};

export const Work = object(workFields);
export const WorksPage = object({
  works: { type: 'array', items: Work },
  page_info: object({ has_next_page: bool, has_previous_page: bool, start_cursor: nullableString, end_cursor: nullableString }),
  total_count: int,
});
export const WorkDetail = object({
  ...workFields,
  network: { type: 'string', enum: ['testnet', 'mainnet'] },
  external_user_ref: nullableString,
  versions_count: int,
});
export const WorkVersions = object({
  versions: {
    type: 'array',
    items: object({
      version: int,
      commitment: hex32,
      title: str,
      filename: str,
      tx_hash: hex32,
      block_number: int,
      block_hash: hex32,
      finalized_at: dateTime,
    }),
  },
});
export const WorkCreators = object({
  version: int,
  creators: {
    type: 'array',
    items: object({
      full_name: str,
      roles: object({ author: bool, composer: bool, arranger: bool, adapter: bool }),
      ipi: nullableString,
      isni: nullableString,
      email: nullableString,
    }),
  },
});
export const Download = object({ url: { type: 'string', format: 'uri' }, expires_at: dateTime });

const apiKeyFields = {
  id: uuid,
  name: str,
  prefix: str,
  scopes: { type: 'array', items: { type: 'string', enum: [...SCOPES] } },
  webhook_url: nullable({ type: 'string' }),
  created_at: dateTime,
};
export const ApiKey = object({ ...apiKeyFields, last_used_at: nullable(dateTime), revoked_at: nullable(dateTime) });
export const CreatedApiKey = object({ ...apiKeyFields, token: { type: 'string', pattern: '^wrk_live_' }, webhook_secret: str });
export const ApiKeyList = object({ api_keys: { type: 'array', items: ApiKey } });

export const Session = object({ session_token: { type: 'string', pattern: '^wrs_' }, external_user_ref: str, expires_at: dateTime });

export const Health = object({ status: { type: 'string', enum: ['ok'] } });
export const Readiness = object({
  status: { type: 'string', enum: ['ready', 'unavailable', 'draining'] },
  checks: {
    type: 'object',
    additionalProperties: object({ ok: { type: 'boolean' }, error: str, detail: { type: 'object' } }, ['error', 'detail']),
  },
});
export const Jwks = object({ keys: { type: 'array', items: { type: 'object' } } });

/** Webhook payloads (docs/api.md#events). */
const eventBase = {
  transaction_id: uuid,
  organization_id: uuid,
  api_key_id: uuid,
  external_user_ref: nullable({ type: 'string' }),
  network,
};
const finalizedFields = {
  ats_id: int,
  tx_hash: hex32,
  block_number: int,
  block_hash: hex32,
  access_code: nullable({ type: 'string', pattern: '^atc_[0-9a-f]{64}$' }),
  explorer_url: str,
  finalized_at: dateTime,
};
export const WorkRegistered = object({ event: { const: 'work_registered' }, ...eventBase, ...finalizedFields });
export const WorkUpdated = object({ event: { const: 'work_updated' }, ...eventBase, ...finalizedFields, version: int });
export const WorkFailed = object({
  event: { const: 'work_failed' },
  ...eventBase,
  ats_id: nullable(int),
  reason: str,
  message: str,
  failed_at: dateTime,
});
