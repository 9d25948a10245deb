import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');

/** Runs the CLI as an operator would: a separate process, JSON on stdout or an envelope on stderr. */
export async function admin(args: string[], env: Record<string, string | undefined>) {
  try {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'shared/cli/main.ts', ...args], {
      cwd: ROOT,
      env: { ...env, PATH: process.env.PATH },
    });
    return { code: 0, out: JSON.parse(stdout), err: undefined };
  } catch (e) {
    const failure = e as { code: number; stderr: string };
    // the envelope is the last line; libraries may have written notices before it
    return { code: failure.code, out: undefined, err: JSON.parse(failure.stderr.trim().split('\n').pop()!) };
  }
}
