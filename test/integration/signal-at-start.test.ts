import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Env } from '../../shared/config';
import { testServices } from '../helpers/services';
import { spawnWeb } from '../helpers/web-process';
import { spawnWorker } from '../helpers/workers';

/**
 * A process that has said it is ready (the web's `web listening`, a worker's `worker started`) may be sent SIGTERM
 * by its platform at once, and must stop as it does on any other SIGTERM: gracefully, exit 0. The preload sends
 * the signal from within the very write of that line, before the process's next statement runs; a process that
 * installed its handlers only after saying so is killed by the signal's default action instead.
 */
describe('a SIGTERM the instant a process says it is ready', function () {
  this.timeout(60_000);
  const preload = path.resolve(__dirname, '../helpers/signal-at-line.mjs');
  const env = (line: string): Env => ({
    ...testServices().env,
    REDIS_PREFIX: `ready_${randomBytes(4).toString('hex')}`,
    NODE_OPTIONS: `--import ${preload}`,
    SIGNAL_AT_LINE: `"msg":"${line}"`,
  });

  it('stops the web gracefully (exit 0)', async () => {
    const web = await spawnWeb(env('web listening'));
    await web.logged('web shutting down');
    expect(await web.exited).to.deep.equal({ code: 0, signal: null });
  });

  it('stops a worker gracefully (exit 0)', async () => {
    const worker = spawnWorker({ ...env('worker started'), WORKER_QUEUES: 'maintenance', LOG_LEVEL: 'info' });
    expect(await worker.exited).to.deep.equal({ code: 0, signal: null });
  });
});
