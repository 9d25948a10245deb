export const createSessionSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['external_user_ref'],
  properties: { external_user_ref: { type: 'string', minLength: 1, maxLength: 255 } },
} as const;
