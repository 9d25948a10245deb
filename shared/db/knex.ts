import knex, { type Knex } from 'knex';
import path from 'node:path';
import type { Config } from '../config';

export type Db = Knex;

export const MIGRATIONS_DIR = path.resolve(__dirname, '../../migrations');

export function createDb(database: Config['database']): Db {
  return knex({
    client: 'pg',
    connection: { connectionString: database.url },
    pool: { min: 0, max: database.poolMax },
    acquireConnectionTimeout: 5000,
    migrations: { directory: MIGRATIONS_DIR, loadExtensions: ['.ts', '.js'], tableName: 'knex_migrations' },
  });
}

export async function migrateLatest(db: Db): Promise<string[]> {
  const [, applied] = (await db.migrate.latest()) as [number, string[]];
  return applied;
}

/** PostgreSQL error codes the services react to. */
export const PG = { uniqueViolation: '23505', checkViolation: '23514', foreignKeyViolation: '23503' } as const;

export function pgCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}
