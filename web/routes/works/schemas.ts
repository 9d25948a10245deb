import type { InitInput, VersionInitInput } from '../../../shared/registration/service';
import { typed } from '../../http/route';

/** JSON schemas of the work write routes (docs/api.md#registration, docs/api.md#field-rules, docs/api.md#versions). */
export const creatorSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['full_name', 'roles'],
  properties: {
    full_name: { type: 'string', minLength: 1, maxLength: 300 },
    roles: {
      type: 'object',
      additionalProperties: false,
      properties: {
        author: { type: 'boolean' },
        composer: { type: 'boolean' },
        arranger: { type: 'boolean' },
        adapter: { type: 'boolean' },
      },
    },
    ipi: { type: 'string', pattern: '^[0-9]{9,11}$' },
    isni: { type: 'string', pattern: '^[0-9]{15}[0-9X]$' },
    email: { type: 'string', format: 'email', maxLength: 320 },
  },
} as const;

const network = { type: 'string', enum: ['testnet', 'mainnet'] } as const;
const externalUserRef = { type: 'string', minLength: 1, maxLength: 255 } as const;
const creators = { type: 'array', minItems: 1, maxItems: 32, items: creatorSchema } as const;

export const initRegistrationSchema = typed<InitInput>()({
  type: 'object',
  additionalProperties: false,
  required: ['network', 'title', 'filename', 'creators'],
  properties: {
    network,
    title: { type: 'string', maxLength: 2000 },
    filename: { type: 'string', minLength: 1, maxLength: 255 },
    creators,
    external_user_ref: externalUserRef,
  },
});

/** Version init (docs/api.md#versions-init): metadata only, no title (the work keeps its own). */
export const initVersionSchema = typed<VersionInitInput>()({
  type: 'object',
  additionalProperties: false,
  required: ['network', 'creators'],
  properties: { network, creators, external_user_ref: externalUserRef },
});

/** Version init-upload (docs/api.md#versions-init-upload): new audio too. */
export const initVersionUploadSchema = typed<VersionInitInput>()({
  type: 'object',
  additionalProperties: false,
  required: ['network', 'filename', 'creators'],
  properties: { ...initVersionSchema.properties, filename: { type: 'string', minLength: 1, maxLength: 255 } },
});

export const jobIdSchema = typed<{ job_id: string }>()({
  type: 'object',
  additionalProperties: false,
  required: ['job_id'],
  properties: { job_id: { type: 'string', minLength: 1, maxLength: 100 } },
});
