import { spawnSync } from 'node:child_process';

export interface Run {
  readonly status: number | null;
  readonly output: string;
}

export function run(command: string, args: readonly string[], options: { cwd?: string; timeoutMs?: number } = {}): Run {
  const result = spawnSync(command, args, {
    cwd: options.cwd,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 60_000,
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}${result.error ? String(result.error) : ''}`;
  return { status: result.status, output };
}

const onPath = (command: string) => run('sh', ['-c', `command -v ${command}`]).status === 0;

/**
 * promtool, from Debian's `prometheus` package: the one on PATH, else installed with apt-get where this runs as
 * root with apt (as on CI and the developers' machines), the package lists refreshed if the first try fails.
 * Answers why not, where it cannot be had, for the test to skip with that reason.
 */
export function ensurePromtool(): { ok: true } | { ok: false; reason: string } {
  if (onPath('promtool')) return { ok: true };
  if (process.getuid?.() !== 0)
    return { ok: false, reason: 'promtool is not on PATH and installing it needs root (apt-get install prometheus)' };
  if (!onPath('apt-get'))
    return { ok: false, reason: "promtool is not on PATH and there is no apt-get to install Debian's prometheus package" };
  const install = () => run('apt-get', ['install', '-y', '--no-install-recommends', 'prometheus'], { timeoutMs: 300_000 });
  let attempt = install();
  if (attempt.status !== 0) {
    run('apt-get', ['update'], { timeoutMs: 300_000 });
    attempt = install();
  }
  if (attempt.status === 0 && onPath('promtool')) return { ok: true };
  return {
    ok: false,
    reason: `apt-get install prometheus failed, so promtool is missing:\n${attempt.output.trim().split('\n').slice(-5).join('\n')}`,
  };
}
