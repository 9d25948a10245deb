import { typed } from '../../http/route';

export const createSessionSchema = typed<{ external_user_ref: string }>()({
  type: 'object',
  additionalProperties: false,
  required: ['external_user_ref'],
  properties: { external_user_ref: { type: 'string', minLength: 1, maxLength: 255 } },
});
