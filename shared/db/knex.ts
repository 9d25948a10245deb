import knex, { type Knex } from 'knex';
import path from 'node:path';
import type { Config } from '../config';
import type { Logger } from '../logger';

export type Db = Knex;

export const MIGRATIONS_DIR = path.resolve(__dirname, '../../migrations');

/**
 * How much longer than its statement timeout a bounded pool waits for the server's answer before it gives up on the
 * connection: the server cancels a statement itself (and the connection serves on); past this, it is not answering.
 */
const UNANSWERED_AFTER_MS = 1000;

/** How long a bounded pool waits for a new connection's handshake: under knex's wait for a connection (5 s). */
const HANDSHAKE_TIMEOUT_MS = 3000;

/**
 * The pool. With `log`, knex's own warnings (a connection that could not be opened, with its stack; a deprecation)
 * are lines of the process's JSON log, under `component: knex`, rather than free text on the console.
 *
 * With `statementTimeoutMs` (a web's), every statement ends: the server cancels one past it, waits for locks included
 * (a `SET` once per connection, not a startup parameter, which PgBouncer refuses); when the server does not answer at
 * all (a frozen host, a partition) the client gives up `UNANSWERED_AFTER_MS` later (pg's "Query read timeout"), and on
 * a new connection's handshake after `HANDSHAKE_TIMEOUT_MS` ("timeout expired"). A connection is lent again only when
 * its last statement was answered and it is in no SQL transaction: one whose statement went unanswered, or whose
 * transaction's ROLLBACK was given up on and never sent, is dropped, even once a late answer has come.
 */
export function createDb(database: Pick<Config['database'], 'url' | 'poolMax'>, log?: Logger, statementTimeoutMs?: number): Db {
  const bounded =
    statementTimeoutMs === undefined
      ? undefined
      : {
          afterCreate: (connection: BoundedConnection, done: (err: Error | null, c: unknown) => void) => {
            connection.query(`SET statement_timeout = ${Math.trunc(statementTimeoutMs)}`).then(
              () => done(null, connection),
              (err: Error) => {
                // knex does not close a connection its afterCreate refused
                connection.end().catch(() => undefined);
                done(err, connection);
              },
            );
          },
          validate: (connection: BoundedConnection) => connection.readyForQuery === true && connection.getTransactionStatus() === 'I',
        };
  return knex({
    client: 'pg',
    connection: {
      connectionString: database.url,
      ...(statementTimeoutMs !== undefined && {
        query_timeout: Math.trunc(statementTimeoutMs) + UNANSWERED_AFTER_MS,
        connectionTimeoutMillis: HANDSHAKE_TIMEOUT_MS,
      }),
    },
    pool: { min: 0, max: database.poolMax, ...bounded },
    acquireConnectionTimeout: 5000,
    migrations: { directory: MIGRATIONS_DIR, loadExtensions: ['.ts', '.js'], tableName: 'knex_migrations' },
    ...(log && { log: knexLog(log.child({ component: 'knex' })) }),
  });
}

const knexLog = (log: Logger): Knex.Logger => ({
  warn: (message: unknown) => log.warn(String(message)),
  error: (message: unknown) => log.error(String(message)),
  deprecate: (method: string, alternative: string) => log.warn({ method, alternative }, 'knex: deprecated'),
  debug: (message: unknown) => log.debug({ message }, 'knex'),
});

export async function migrateLatest(db: Db): Promise<string[]> {
  const [, applied] = (await db.migrate.latest()) as [number, string[]];
  return applied;
}

/** A `pg` connection of knex's pool, as `withConnection` lends it. */
export interface PgConnection {
  query(config: { name?: string; text: string; values: unknown[] }): Promise<{ rows: any[] }>;
}

/**
 * What a bounded pool uses of a `pg` connection: a plain query, its end, whether its last statement was answered, and
 * its SQL transaction's status as the server last told it ('I': in none).
 */
interface BoundedConnection {
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
  readonly readyForQuery?: boolean;
  getTransactionStatus(): string | null;
}

/**
 * Lends one connection of the pool to `fn` and returns it after: for what lives in a session (an advisory lock,
 * a named prepared statement) rather than in a query.
 */
export async function withConnection<T>(db: Db | Knex.Transaction, fn: (connection: PgConnection) => Promise<T>): Promise<T> {
  const pool = db.client as { acquireConnection(): Promise<PgConnection>; releaseConnection(c: PgConnection): Promise<void> };
  const connection = await pool.acquireConnection();
  try {
    return await fn(connection);
  } finally {
    await pool.releaseConnection(connection);
  }
}

/**
 * Runs a named prepared statement on a connection of knex's pool (or of the SQL transaction `db` is): PostgreSQL
 * parses and plans it once per connection rather than at every call, and knex's query building is skipped. A
 * statement's text must name its result columns (no `*`), so a migration that adds a column leaves it working.
 *
 * A migration that changes the type of a column it returns makes PostgreSQL refuse it on every connection that
 * had prepared it ("cached plan must not change result type"), and a statement whose values failed to bind is
 * gone from the server while pg still counts it as prepared: such a statement runs unnamed on that connection
 * from then on (parsed and planned each time, as knex's are). Outside a SQL transaction the failed call is run
 * again at once; inside one, the error has aborted it, so it is thrown and the caller's retry runs unnamed.
 */
export async function prepared(db: Db | Knex.Transaction, name: string, text: string, values: unknown[]): Promise<{ rows: any[] }> {
  const trx = (db as Partial<Knex.Transaction>).isTransaction ? (db as Knex.Transaction) : undefined;
  // knex refuses a statement once its transaction has ended; so does this (the connection may serve another now)
  if (trx?.isCompleted()) throw new Error(`${name}: the SQL transaction has already ended`);
  return withConnection(db, async (connection) => {
    // told to knex's `query` listeners as its own statements are (with the SQL transaction's id, when in one)
    const { __knexUid, __knexTxId } = connection as PgConnection & { __knexUid?: string; __knexTxId?: string };
    db.client.emit('query', { __knexUid, __knexTxId, method: 'raw', sql: text, bindings: values, name });
    if (unnamed.get(connection)?.has(name)) return connection.query({ text, values });
    try {
      return await connection.query({ name, text, values });
    } catch (err) {
      if (!STALE_STATEMENT.has(pgCode(err) ?? '')) throw err;
      unnamed.set(connection, (unnamed.get(connection) ?? new Set()).add(name));
      if (trx) throw err;
      return connection.query({ text, values });
    }
  });
}

/** 0A000: "cached plan must not change result type"; 26000: the named statement does not exist (any more). */
const STALE_STATEMENT = new Set(['0A000', '26000']);

/** Per connection, the statements that run unnamed on it (see `prepared`). */
const unnamed = new WeakMap<PgConnection, Set<string>>();

/** A knex raw, function or builder: SQL for knex to write into a statement, which a prepared statement's values cannot be. */
export const isKnexExpression = (value: unknown): boolean =>
  typeof value === 'object' && value !== null && typeof (value as { toSQL?: unknown }).toSQL === 'function';

/** Per kind of statement, table, set of columns and what is returned: one prepared statement's name and text, made on first use. */
const statements = new Map<string, { name: string; text: string }>();

function statementOf(
  kind: 'update' | 'insert' | 'insert_many' | 'update_many',
  table: string,
  columns: readonly string[],
  returning: string,
  write: () => string,
) {
  const key = `${kind}|${table}|${columns.join(',')}|${returning}`;
  let statement = statements.get(key);
  if (!statement) {
    for (const name of [table, ...columns]) if (!/^[a-z_]+$/.test(name)) throw new Error(`not a table or column name: ${name}`);
    // a name short of PostgreSQL's 63 bytes however many columns there are
    statement = { name: `${table}_${kind}_${statements.size}`, text: write() };
    statements.set(key, statement);
  }
  return statement;
}

/** `UPDATE table SET column = $2, … , updated_at = now() WHERE id = $1 RETURNING returning`, to run with `prepared`. */
export function preparedUpdate(table: string, columns: readonly string[], returning: string): { name: string; text: string } {
  return statementOf('update', table, columns, returning, () => {
    const set = [...columns.map((column, i) => `"${column}" = $${i + 2}`), 'updated_at = now()'].join(', ');
    return `UPDATE "${table}" SET ${set} WHERE id = $1 RETURNING ${returning}`;
  });
}

/**
 * Inserts one row (snake_case columns; an undefined value leaves its column to its default) with a prepared
 * statement named per table and set of columns; resolves with what `returning` names. Values go as they are:
 * JSON is the caller's to stringify, as with knex, and SQL (a knex expression) is refused.
 */
export async function insertRow(db: Db | Knex.Transaction, table: string, row: Record<string, unknown>, returning: string): Promise<any[]> {
  const columns = Object.keys(row).filter((column) => row[column] !== undefined);
  const values = columns.map((column) => {
    if (isKnexExpression(row[column])) throw new Error(`insertRow takes values, not SQL (${table}.${column})`);
    return row[column];
  });
  const { name, text } = statementOf('insert', table, columns, returning, () => `${insertText(table, columns)} RETURNING ${returning}`);
  return (await prepared(db, name, text, values)).rows;
}

/** `INSERT INTO "table" ("column", …) VALUES ($from, …)`: one row's insert, its values numbered from `from`. */
export function insertText(table: string, columns: readonly string[], from = 1): string {
  const list = columns.map((column) => `"${column}"`).join(', ');
  return `INSERT INTO "${table}" (${list}) VALUES (${columns.map((_, i) => `$${from + i}`).join(', ')})`;
}

/*
 * Many rows in one statement: the rows go as one parameter, a JSON array that PostgreSQL reads as the table's own row
 * type (json_populate_recordset), so each value is parsed by its column's type and a statement of any number of rows
 * has one text, prepared once per connection. JSON columns go as values (not strings), byte columns as Buffers.
 */

/**
 * The rows as `json_populate_recordset` reads them: bytes (a Buffer, any Uint8Array) in bytea's hex form, every other
 * value as JSON has it (a JSON column's value, not its text: a string is stored as a JSON string).
 * Every row has the first's columns and a value for each: a column missing from a row would be written NULL.
 */
export function rowsParameter(rows: readonly Record<string, unknown>[]): string {
  const columns = Object.keys(rows[0] ?? {});
  // the values turned into JSON's before JSON.stringify, which runs far slower with a replacer (called for every
  // value of every JSON column too)
  const values = rows.map((row) => {
    if (Object.keys(row).length !== columns.length) throw new Error(`rows take the same columns (${Object.keys(row).join(', ')})`);
    const out: Record<string, unknown> = {};
    for (const column of columns) {
      const value = row[column];
      if (value === undefined) throw new Error(`rows take the same columns, each with a value (${column})`);
      if (isKnexExpression(value)) throw new Error(`rows take values, not SQL (${column})`);
      // what JSON would turn into NULL, or into other bytes, without a word: refused, as a typed parameter refuses it
      if ((typeof value === 'number' && !Number.isFinite(value)) || (value instanceof Date && Number.isNaN(value.getTime())))
        throw new Error(`rows take finite numbers and valid dates (${column})`);
      if (typeof value === 'function' || typeof value === 'symbol') throw new Error(`rows take JSON's values (${column})`);
      out[column] =
        value instanceof Uint8Array ? `\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')}` : value;
    }
    return out;
  });
  return JSON.stringify(values);
}

/** `INSERT INTO "table" (…) SELECT … FROM json_populate_recordset(NULL::"table", $param::json)`: the rows of one parameter. */
export function insertManyText(table: string, columns: readonly string[], param = 1): string {
  const list = columns.map((column) => `"${column}"`).join(', ');
  return `INSERT INTO "${table}" (${list}) SELECT ${list} FROM json_populate_recordset(NULL::"${table}", $${param}::json)`;
}

/**
 * Inserts rows (snake_case columns, every row the same ones) in one prepared statement per table and set of
 * columns; resolves with what `returning` names of each.
 */
export async function insertRows(
  db: Db | Knex.Transaction,
  table: string,
  rows: readonly Record<string, unknown>[],
  returning: string,
): Promise<any[]> {
  if (rows.length === 0) return [];
  const columns = Object.keys(rows[0]!);
  const { name, text } = statementOf(
    'insert_many',
    table,
    columns,
    returning,
    () => `${insertManyText(table, columns)} RETURNING ${returning}`,
  );
  return (await prepared(db, name, text, [rowsParameter(rows)])).rows;
}

/**
 * Changes the same columns of rows, each found by its `id` (the first column of every row), and their
 * `updated_at`, in one prepared statement; resolves with the `returning` columns of each row changed.
 */
export async function updateRows(
  db: Db | Knex.Transaction,
  table: string,
  rows: readonly Record<string, unknown>[],
  returning: readonly string[],
): Promise<any[]> {
  if (rows.length === 0) return [];
  const [id, ...columns] = Object.keys(rows[0]!);
  if (id !== 'id') throw new Error(`updateRows: each row starts with its id (${table})`);
  const { name, text } = statementOf('update_many', table, columns, returning.join(','), () => {
    const set = [...columns.map((column) => `"${column}" = u."${column}"`), 'updated_at = now()'].join(', ');
    const back = returning.map((column) => `t."${column}"`).join(', ');
    return `UPDATE "${table}" AS t SET ${set} FROM json_populate_recordset(NULL::"${table}", $1::json) AS u WHERE t.id = u.id RETURNING ${back}`;
  });
  return (await prepared(db, name, text, [rowsParameter(rows)])).rows;
}

/** PostgreSQL error codes the services react to. */
export const PG = { uniqueViolation: '23505', checkViolation: '23514', foreignKeyViolation: '23503' } as const;

export function pgCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}
