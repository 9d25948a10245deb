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

/** A `pg` connection of knex's pool, as `withConnection` lends it. */
export interface PgConnection {
  query(config: { name?: string; text: string; values: unknown[] }): Promise<{ rows: any[] }>;
}

/**
 * Lends one connection of the pool to `fn` and returns it after: for what lives in a session (an advisory lock,
 * a named prepared statement) rather than in a query.
 */
export async function withConnection<T>(db: Db, fn: (connection: PgConnection) => Promise<T>): Promise<T> {
  const pool = db.client as { acquireConnection(): Promise<PgConnection>; releaseConnection(c: PgConnection): Promise<void> };
  const connection = await pool.acquireConnection();
  try {
    return await fn(connection);
  } finally {
    await pool.releaseConnection(connection);
  }
}

/** PostgreSQL error codes the services react to. */
export const PG = { uniqueViolation: '23505', checkViolation: '23514', foreignKeyViolation: '23503' } as const;

export function pgCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}
