import type { Knex } from 'knex';

/** An index's name and the rest of its CREATE INDEX statement after the name (`ON table (columns) ...`). */
export type IndexDefinition = readonly [name: string, definition: string];

/**
 * Builds the `build` indexes, then drops the `drop` ones, each CONCURRENTLY (from a migration with `config = {
 * transaction: false }`), so writes to their tables go on meanwhile and the old indexes go only once the new ones are
 * built. A migration's `up` and `down` call it with the two lists swapped.
 */
export async function replaceIndexesConcurrently(
  knex: Knex,
  { build, drop }: { build: readonly IndexDefinition[]; drop: readonly IndexDefinition[] },
): Promise<void> {
  await buildIndexesConcurrently(knex, build);
  await dropIndexesConcurrently(knex, drop);
}

/**
 * Builds each index CONCURRENTLY. On a rerun after a failure, a valid index of that name is kept and one left invalid
 * by a build that failed half way is dropped and built again.
 */
async function buildIndexesConcurrently(knex: Knex, indexes: readonly IndexDefinition[]): Promise<void> {
  for (const [name, definition] of indexes) {
    const { rows } = await knex.raw('SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(?)', [name]);
    if (rows[0]?.indisvalid) continue;
    if (rows[0]) await knex.raw(`DROP INDEX CONCURRENTLY ${name}`);
    await knex.raw(`CREATE INDEX CONCURRENTLY ${name} ${definition}`);
  }
}

/** Drops each index that exists, CONCURRENTLY. */
async function dropIndexesConcurrently(knex: Knex, indexes: readonly IndexDefinition[]): Promise<void> {
  for (const [name] of indexes) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
}
