import type { Knex } from 'knex';

/** An index's name and the rest of its CREATE INDEX statement after the name (`ON table (columns) ...`). */
export type IndexDefinition = readonly [name: string, definition: string];

/**
 * Builds each index CONCURRENTLY (from a migration with `config = { transaction: false }`), so writes to its table go
 * on while it builds. On a rerun after a failure, a valid index of that name is kept and one left invalid by a build
 * that failed half way is dropped and built again.
 */
export async function buildIndexesConcurrently(knex: Knex, indexes: readonly IndexDefinition[]): Promise<void> {
  for (const [name, definition] of indexes) {
    const { rows } = await knex.raw('SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(?)', [name]);
    if (rows[0]?.indisvalid) continue;
    if (rows[0]) await knex.raw(`DROP INDEX CONCURRENTLY ${name}`);
    await knex.raw(`CREATE INDEX CONCURRENTLY ${name} ${definition}`);
  }
}

/** Drops each index that exists, CONCURRENTLY. */
export async function dropIndexesConcurrently(knex: Knex, indexes: readonly IndexDefinition[]): Promise<void> {
  for (const [name] of indexes) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
}
