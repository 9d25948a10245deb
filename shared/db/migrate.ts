/** The `release` process: applies pending migrations and exits. */
import { loadConfig } from '../config';
import { createLogger } from '../logger';
import { createDb, migrateLatest } from './knex';

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.log.level);
  const db = createDb(config.database, log);
  try {
    const applied = await migrateLatest(db);
    log.info({ applied }, applied.length ? 'migrations applied' : 'database already up to date');
  } finally {
    await db.destroy();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
