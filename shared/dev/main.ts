/**
 * `npm run dev`: the whole service on embedded defaults in one command. Whatever the environment does not
 * configure is found or started locally (.data/), migrations run, then the web and every worker start.
 */
import '../telemetry/register-dev';
import path from 'node:path';
import { promises as fs } from 'node:fs';
import { loadConfig, processEnv, type Env } from '../config';
import { loadDevOptions } from './options';
import { createLogger } from '../logger';
import { createDb, migrateLatest } from '../db/knex';
import { shown, startEmbedded } from './embedded';
import { quietDependencyNotices } from './quiet';
import { devOperatorAccess, type DevOperatorAccess } from './operator-credential';
import { devLogDestination } from './log-destination';
import { BOARD_PATH } from '../../web/routes/queues-board/board';
import { startWeb } from '../../web/main';
import { startJobs } from '../../jobs/main';
import { stopTracing } from '../telemetry/start';

async function main(): Promise<void> {
  const env = processEnv();
  quietDependencyNotices(env);
  const dev = loadDevOptions(env);
  const DATA_DIR = dev.dataDir ? path.resolve(dev.dataDir) : path.resolve(__dirname, '../../.data');
  const DEV_ENV_FILE = path.join(DATA_DIR, 'dev.env');
  const say = (message: string) => process.stdout.write(`[dev] ${message}\n`);
  say('starting dependencies…');
  const embedded = await startEmbedded(env, {
    dataDir: DATA_DIR,
    databaseName: dev.database,
    blocks: dev.blockTimeMs,
    webBaseUrl: `http://127.0.0.1:${dev.port}`,
    onStep: say,
  });
  // Receivers on this machine or its network are normal in development: no SSRF refusal (WEBHOOK_ALLOW_PRIVATE).
  // The embedded chain starts afresh each time: its chain state in the database is forgotten when it differs.
  // The way into Bull Board: the user's OPERATOR_CREDENTIAL, else a development one kept in dev.env.
  const operator = await devOperatorAccess(env, env.NODE_ENV ?? 'development', DEV_ENV_FILE);
  const devEnv: Env = {
    WEBHOOK_ALLOW_PRIVATE: 'true',
    ...(embedded.chains.length ? { CHAIN_FORGET_ON_NEW_GENESIS: 'true' } : {}),
    ...(operator.source === 'development' ? { OPERATOR_CREDENTIAL: operator.credential } : {}),
    ...embedded.env,
  };
  // no load balancer in front: Ctrl-C stops the web without the readiness drain
  const merged: Env = { NODE_ENV: 'development', SHUTDOWN_DRAIN_MS: '0', ...devEnv, ...env };
  await fs.writeFile(
    DEV_ENV_FILE,
    Object.entries(devEnv)
      .map(([k, v]) => `${k}=${v}`)
      .join('\n') + '\n',
    { mode: 0o600 },
  );

  let stopping = false;
  const stops: (() => Promise<void>)[] = [embedded.stop];
  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    say('stopping…');
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await stopTracing();
    process.exit(code);
  };
  // `on`, not `once`: Ctrl-C reaches this process from the terminal and again through npm, which forwards it;
  // a second SIGINT without a listener would kill the process before it stopped what it started.
  process.on('SIGINT', () => void shutdown(0));
  process.on('SIGTERM', () => void shutdown(0));

  try {
    const config = loadConfig(merged);
    const log = createLogger(config.log.level, devLogDestination(process.stdout));
    const db = createDb(config.database, log);
    const applied = await migrateLatest(db).finally(() => db.destroy());
    say(applied.length ? `migrations applied: ${applied.length}` : 'database up to date');
    const jobs = await startJobs(config, log);
    stops.push(jobs.stop);
    const web = await startWeb(config, log);
    stops.push(web.stop);
    say(`workers: ${jobs.queues.join(', ') || '(no processors yet)'}`);
    say(`works-api is up at ${web.url} (readiness: ${web.url}/readyz)`);
    say(`  API reference: ${web.url}/docs`);
    say(`  Bull Board:    ${web.url}${BOARD_PATH}${boardAccess(operator, shown(DEV_ENV_FILE))}`);
    say(`settings for a second terminal are in ${shown(DEV_ENV_FILE)}; next, try:`);
    say('  npm run example');
    say('  npm run --silent admin -- org create --name Acme --credits 1000');
  } catch (err) {
    process.stderr.write(`[dev] failed: ${(err as Error).message}\n`);
    await shutdown(1);
  }
}

/** How to sign in to Bull Board, as the runner prints it after the board's URL. */
function boardAccess(operator: DevOperatorAccess, devEnvFile: string): string {
  switch (operator.source) {
    case 'development':
      return `, user ${operator.username}, password ${operator.password} (development credential, kept in ${devEnvFile})`;
    case 'environment':
      return ` (your OPERATOR_CREDENTIAL, user ${operator.username})`;
    case 'none':
      return ' (an operator-role token)';
  }
}

main().catch((err) => {
  process.stderr.write(`[dev] failed: ${(err as Error).message}\n`);
  process.exit(1);
});
