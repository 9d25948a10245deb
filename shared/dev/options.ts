import { ConfigError, EnvReader, type Env } from '../env-reader';

export interface DevOptions {
  readonly blockTimeMs: number;
  readonly port: number;
  /** Where the embedded dependencies keep their data (`.data/` in the checkout by default). */
  readonly dataDir: string | undefined;
  /** The database created on a found or embedded PostgreSQL when DATABASE_URL is unset. */
  readonly database: string;
}

/** Settings of the development runner only (`npm run dev`). */
export function loadDevOptions(env: Env): DevOptions {
  const problems: string[] = [];
  const read = new EnvReader(env, problems);
  const options = {
    blockTimeMs: read.int('DEV_BLOCK_TIME_MS', 2000, 100, 60_000),
    port: read.int('PORT', 3000, 0, 65535),
    dataDir: read.optional('DEV_DATA_DIR'),
    database: read.optional('DEV_DATABASE') ?? 'works_dev',
  };
  if (problems.length) throw new ConfigError(problems);
  return options;
}
