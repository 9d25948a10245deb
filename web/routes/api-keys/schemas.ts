import { SCOPES } from '../../../shared/api-keys/types';
import { typed } from '../../http/route';

export const createApiKeySchema = typed<CreateApiKeyBody>()({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'scopes'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 100, pattern: '\\S' },
    scopes: { type: 'array', minItems: 1, maxItems: SCOPES.length, uniqueItems: true, items: { type: 'string', enum: [...SCOPES] } },
    webhook_url: { type: ['string', 'null'], maxLength: 2048 },
  },
});

export interface CreateApiKeyBody {
  name: string;
  scopes: (typeof SCOPES)[number][];
  webhook_url?: string | null;
}
