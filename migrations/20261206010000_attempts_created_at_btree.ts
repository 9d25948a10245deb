import type { Knex } from 'knex';
import { replaceIndexesConcurrently, type IndexDefinition } from '../shared/db/indexes';

/**
 * The attempts' created_at back in a B-tree, in place of 20261206000000's BRIN index. The pruning reads attempts by
 * created_at; a BRIN range not yet summarized matches every query, so each hourly prune read the table's unsummarized
 * tail, and pages freed by the pruning and reused by new attempts widen the ranges until most match
 * (docs/performance.md, section 41). Built CONCURRENTLY, as 20261206000000's.
 */
export const config = { transaction: false };

const BTREE: readonly IndexDefinition[] = [['webhook_attempts_created_at_index', 'ON webhook_attempts (created_at)']];
const BRIN: readonly IndexDefinition[] = [['webhook_attempts_created_at_brin', 'ON webhook_attempts USING brin (created_at)']];

export async function up(knex: Knex): Promise<void> {
  await replaceIndexesConcurrently(knex, { build: BTREE, drop: BRIN });
}

export async function down(knex: Knex): Promise<void> {
  await replaceIndexesConcurrently(knex, { build: BRIN, drop: BTREE });
}
