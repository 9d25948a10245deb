import path from 'node:path';
import { promises as fs } from 'node:fs';
import { execFile, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import os from 'node:os';
import type { Env } from '../../shared/config';
import { createDatabaseIfMissing, dropDatabase } from '../../shared/dev/embedded/postgres';
import { freePort } from '../../shared/dev/embedded/net';
import { testServices } from './services';

const ROOT = path.resolve(__dirname, '../..');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

export interface DevRunnerOptions {
  readonly env: Env;
  /** The checkout to run in: this one unless given (a fresh clone, say). */
  readonly cwd?: string;
  /** `npm run dev`, as a newcomer types it; otherwise the script's command itself (`node --import tsx shared/dev/main.ts`). */
  readonly viaNpm?: boolean;
  /** Appends everything the runner prints to this file too. */
  readonly logFile?: string;
}

export interface DevRunner {
  readonly child: ChildProcess;
  /** The base URL of its "works-api is up at" line. */
  readonly url: string;
  /** Everything printed so far, stdout and stderr as they arrived. */
  output(): string;
  /** The first match of `pattern` in the output, once it has been printed. */
  printed(pattern: RegExp): Promise<RegExpExecArray>;
  /** Ctrl-C: SIGINT to its process group (npm and the runner alike), then its exit code once it has stopped. */
  stop(): Promise<number | null>;
}

/**
 * The environment a test gives a dev runner: PostgreSQL and Redis as the harness found them, with a database and
 * a key prefix named after `name` of the test's own, a free port and fast blocks, plus `extra`; `drop` removes
 * the database.
 */
export async function devRunnerEnv(name: string, extra: Env = {}): Promise<{ env: Env; drop(): Promise<void> }> {
  const outer = new URL(testServices().env.DATABASE_URL!);
  outer.pathname = '';
  const serverUrl = outer.toString().replace(/\/$/, '');
  const database = `works_${name}_${Date.now().toString(36)}`;
  const env: Env = {
    PATH: process.env.PATH!,
    HOME: process.env.HOME ?? os.tmpdir(),
    DATABASE_URL: await createDatabaseIfMissing(serverUrl, database),
    REDIS_URL: testServices().env.REDIS_URL!,
    REDIS_PREFIX: `${name}_${Date.now()}`,
    PORT: String(await freePort()),
    DEV_BLOCK_TIME_MS: '300',
    ...extra,
  };
  return { env, drop: () => dropDatabase(serverUrl, database).catch(() => undefined) };
}

/** Starts `npm run dev` as a child process; resolves once it says it is up. */
export async function startDev(options: DevRunnerOptions): Promise<DevRunner> {
  const cwd = options.cwd ?? ROOT;
  // a process group of its own, as a shell gives a foreground command, for stop() to signal as Ctrl-C does
  const spawnOptions: SpawnOptions = { cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true };
  const child: ChildProcess = options.viaNpm
    ? spawn(NPM, ['run', 'dev'], spawnOptions)
    : spawn(process.execPath, ['--import', 'tsx', 'shared/dev/main.ts'], spawnOptions);
  let output = '';
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      exitCode = code;
      resolve(code);
    }),
  );
  const waiters = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    if (options.logFile) void fs.appendFile(options.logFile, chunk);
    for (const check of [...waiters]) check();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);

  const printed = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(output);
        if (match) {
          waiters.delete(check);
          resolve(match);
        } else if (exitCode !== undefined) {
          waiters.delete(check);
          reject(new Error(`npm run dev exited ${exitCode} before printing ${pattern}: ${output.slice(-2000)}`));
        }
      };
      waiters.add(check);
      void exited.then(check);
      check();
    });

  const url = (await printed(/works-api is up at (http:\/\/\S+)/))[1]!;
  return {
    child,
    url,
    output: () => output,
    printed,
    stop: async () => {
      if (exitCode === undefined) process.kill(-child.pid!, 'SIGINT');
      return exited;
    },
  };
}

export interface ExampleOptions {
  /** The whole environment of the example's process. */
  readonly env: Env;
  readonly cwd?: string;
  /** `npm run example -- …` as the README says; otherwise `node --import tsx docs/example/quickstart.ts …`. */
  readonly viaNpm?: boolean;
  readonly timeoutMs?: number;
}

/** `npm run example` as a newcomer runs it: its own process; its exit code and what it printed. */
export function runExample(args: string[], options: ExampleOptions): Promise<{ code: number; stdout: string; stderr: string }> {
  const [file, argv] = options.viaNpm
    ? [NPM, ['run', 'example', '--', ...args]]
    : [process.execPath, ['--import', 'tsx', 'docs/example/quickstart.ts', ...args]];
  return new Promise((resolve) => {
    execFile(file, argv, { cwd: options.cwd ?? ROOT, env: options.env, timeout: options.timeoutMs ?? 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}
