import path from 'node:path';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Env } from '../../shared/config';

export interface WebProcess {
  readonly url: string;
  readonly pid: number;
  /** The process's log lines so far (its stdout, one JSON object per line). */
  readonly logs: Record<string, any>[];
  /** Resolves when the process has ended, with how. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first log line whose `msg` starts with `prefix`. */
  logged(prefix: string): Promise<Record<string, any>>;
  kill(signal?: NodeJS.Signals): void;
}

/**
 * A `web` process as the Procfile runs it (`node --import tsx web/main.ts`, node receiving signals itself), on
 * the given environment, listening on a free port of 127.0.0.1; resolves once it logs `web listening`.
 */
export async function spawnWeb(env: Env): Promise<WebProcess> {
  const root = path.resolve(__dirname, '../..');
  const child = spawn(process.execPath, ['--import', 'tsx', 'web/main.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH, ...env, PORT: '0', HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const logs: Record<string, any>[] = [];
  const waiters: { prefix: string; resolve: (line: Record<string, any>) => void }[] = [];
  createInterface({ input: child.stdout! }).on('line', (text) => {
    let line: Record<string, any>;
    try {
      line = JSON.parse(text);
    } catch {
      return;
    }
    logs.push(line);
    for (const waiter of waiters.filter((w) => String(line.msg).startsWith(w.prefix))) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(line);
    }
  });
  const logged = (prefix: string) =>
    new Promise<Record<string, any>>((resolve, reject) => {
      const seen = logs.find((line) => String(line.msg).startsWith(prefix));
      if (seen) return resolve(seen);
      waiters.push({ prefix, resolve });
      // its last log line too: a start it refused says why there (a fatal line), not on stderr
      void exited.then(({ code }) => {
        const last = logs.at(-1);
        reject(
          new Error(
            `the web exited (${code}) before logging "${prefix}": ${stderr}${last ? ` (its last log line: ${JSON.stringify(last)})` : ''}`,
          ),
        );
      });
    });
  const listening = await logged('web listening');
  return {
    url: listening.url,
    pid: child.pid!,
    logs,
    exited,
    logged,
    kill: (signal = 'SIGTERM') => void child.kill(signal),
  };
}
