import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort, waitUntilListening } from './net';

export interface RedisHandle {
  readonly url: string;
  readonly source: 'configured' | 'local' | 'private';
  stop(): Promise<void>;
}

export const REDIS_INSTALL_HINT =
  'No Redis is reachable at 127.0.0.1:6379 and no redis-server is on PATH. Install one (Debian/Ubuntu: ' +
  'apt-get install redis-server; macOS: brew install redis) or set REDIS_URL.';

/** REDIS_URL, else a reachable local server, else a private redis-server from PATH (nothing kept on disk). */
export async function ensureRedis(configuredUrl: string | undefined): Promise<RedisHandle> {
  if (configuredUrl) return { url: configuredUrl, source: 'configured', stop: async () => undefined };
  const local = 'redis://127.0.0.1:6379';
  if (await canPing(local)) return { url: local, source: 'local', stop: async () => undefined };
  return startPrivateRedis();
}

/** A redis-server of our own, on `port` (a free one when not given), keeping nothing on disk; `args`: more of its options. */
export async function startPrivateRedis(port?: number, args: readonly string[] = []): Promise<RedisHandle> {
  if (spawnSync('redis-server', ['--version']).error) throw new Error(REDIS_INSTALL_HINT);
  port ??= await freePort();
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args],
    { stdio: 'ignore' },
  );
  await waitUntilListening('127.0.0.1', port, 10_000);
  return {
    url: `redis://127.0.0.1:${port}`,
    source: 'private',
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function canPing(url: string): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}
