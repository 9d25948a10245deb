import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

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

/** Where an extracted promtool is kept between runs (git-ignored with node_modules). */
const CACHE = path.resolve(__dirname, '../../node_modules/.cache/promtool');
const CACHED = path.join(CACHE, 'usr/bin/promtool');

const onPath = (command: string) => run('sh', ['-c', `command -v ${command}`]).status === 0;

/**
 * promtool, from Debian's `prometheus` package: the one on PATH; else one extracted before into CACHE; else the
 * package downloaded with `apt-get download` (no root needed, nothing installed, no service started) and only its
 * files unpacked into CACHE with `dpkg-deb -x`, the package lists refreshed first where that is allowed (root)
 * and the first download failed. Answers why not, where it cannot be had, for the test to skip with that reason.
 */
export function ensurePromtool(): { ok: true; promtool: string } | { ok: false; reason: string } {
  if (onPath('promtool')) return { ok: true, promtool: 'promtool' };
  if (fs.existsSync(CACHED)) return { ok: true, promtool: CACHED };
  if (!onPath('apt-get') || !onPath('dpkg-deb'))
    return { ok: false, reason: "promtool is not on PATH, and there is no apt-get/dpkg-deb to fetch Debian's prometheus package" };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'promtool-'));
  try {
    const download = () => run('apt-get', ['download', 'prometheus'], { cwd: dir, timeoutMs: 120_000 });
    let fetched = download();
    if (fetched.status !== 0 && process.getuid?.() === 0) {
      run('apt-get', ['update'], { timeoutMs: 120_000 });
      fetched = download();
    }
    const deb = fs.readdirSync(dir).find((f) => f.endsWith('.deb'));
    if (fetched.status !== 0 || !deb)
      return { ok: false, reason: `apt-get download prometheus failed:\n${fetched.output.trim().split('\n').slice(-5).join('\n')}` };
    fs.mkdirSync(CACHE, { recursive: true });
    const unpacked = run('dpkg-deb', ['-x', path.join(dir, deb), CACHE], { timeoutMs: 120_000 });
    if (unpacked.status !== 0 || !fs.existsSync(CACHED)) return { ok: false, reason: `dpkg-deb -x failed: ${unpacked.output.trim()}` };
    return { ok: true, promtool: CACHED };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
