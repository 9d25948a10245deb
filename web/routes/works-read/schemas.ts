import { NETWORKS } from '../../../shared/config';
import { typed } from '../../http/route';

/**
 * Query strings of the read routes (docs/api.md#reading-works). Parameters not named here are ignored:
 * the detail routes ignore `external_user_ref` by design (docs/api.md#work-detail).
 */
const network = { type: 'string', enum: [...NETWORKS] } as const;

export const listWorksQuerySchema = typed<ListWorksQuery>()({
  type: 'object',
  properties: {
    network,
    first: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    after: { type: 'string', minLength: 1, maxLength: 200 },
    external_user_ref: { type: 'string', minLength: 1, maxLength: 255 },
  },
});

export const workQuerySchema = typed<WorkQuery>()({
  type: 'object',
  properties: { network },
});

export const creatorsQuerySchema = typed<WorkQuery>()({
  type: 'object',
  properties: { network, version: { type: 'integer', minimum: 1, maximum: 2_147_483_647 } },
});

export interface ListWorksQuery {
  network?: (typeof NETWORKS)[number];
  first: number;
  after?: string;
  external_user_ref?: string;
}

export interface WorkQuery {
  network?: (typeof NETWORKS)[number];
  version?: number;
}
